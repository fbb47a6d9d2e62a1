/**
 * Playwright drives Debian's Chromium (never a downloaded browser: `npx playwright install`
 * cannot work offline). WebGPU comes from `--enable-unsafe-webgpu` on pages served from
 * 127.0.0.1, on SwiftShader's software Vulkan when there is no GPU (docs/platform.md).
 */
import { defineConfig } from '@playwright/test';

const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export default defineConfig({
  testDir: 'test/e2e',
  testMatch: '**/*.spec.ts',
  timeout: 120_000,
  expect: { timeout: 30_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: process.env.CI ? [['list']] : [['list']],
  outputDir: 'test-results',
  use: {
    headless: true,
    viewport: { width: 1400, height: 900 },
    launchOptions: {
      executablePath,
      args: [
        '--enable-unsafe-webgpu',
        '--enable-features=Vulkan',
        '--no-sandbox',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
    trace: 'off',
  },
});
