/**
 * The quiet provider probe: the Vulkan checks over a fake file system, the reasons it gives,
 * the child's embedded model, and `--device auto` on this machine (a real child probe when
 * Chromium's software Vulkan is installed).
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GraphBuilder } from '../../src/core/model/onnx/graph-builder.ts';
import { OnnxType, serializeModel } from '../../src/core/model/onnx/onnx-model.ts';
import { describeProviders } from '../../src/node/ort-node-runtime.ts';
import { missingCudaLibraries, missingVulkan, probeFailure, type FileLookup } from '../../src/node/provider-probe.ts';

function files(present: string[], ldCache = ''): FileLookup {
  return {
    exists: (file) => present.includes(file),
    list: (dir) => present.filter((file) => path.dirname(file) === dir).map((file) => path.basename(file)),
    ldCache: () => ldCache,
  };
}

const LOADER = '/opt/vk/libvulkan.so.1';
const base = { HOME: '/home/u', XDG_DATA_DIRS: '/usr/share', XDG_CONFIG_DIRS: '/etc/xdg' };

describe('missingVulkan', () => {
  it('no loader anywhere: says so, whatever the drivers', () => {
    expect(missingVulkan({ ...base, VK_ICD_FILENAMES: '/nonexistent' }, files([]))).toBe('no Vulkan loader: libvulkan.so.1 not found');
  });

  it('finds the loader on LD_LIBRARY_PATH or in the linker cache', () => {
    const icd = '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json';
    expect(missingVulkan({ ...base, LD_LIBRARY_PATH: '/x:/opt/vk' }, files([LOADER, icd]))).toBeUndefined();
    expect(missingVulkan(base, files([icd], '\0libvulkan.so.1\0/usr/lib/x86_64-linux-gnu/libvulkan.so.1'))).toBeUndefined();
  });

  it('VK_ICD_FILENAMES / VK_DRIVER_FILES replace the search: a name that is not there means no driver', () => {
    const env = { ...base, LD_LIBRARY_PATH: '/opt/vk', VK_ICD_FILENAMES: '/nonexistent' };
    const icd = '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json';
    expect(missingVulkan(env, files([LOADER, icd]))).toBe('no Vulkan driver: VK_ICD_FILENAMES=/nonexistent names no driver manifest');
    expect(missingVulkan({ ...env, VK_ICD_FILENAMES: '/opt/vk/swiftshader.json' }, files([LOADER, '/opt/vk/swiftshader.json']))).toBeUndefined();
    expect(missingVulkan({ ...env, VK_DRIVER_FILES: '/opt/icds' }, files([LOADER, '/opt/icds/a.json']))).toBeUndefined();
  });

  it('without those variables, looks in the vulkan/icd.d folders (and VK_ADD_DRIVER_FILES)', () => {
    const env = { ...base, LD_LIBRARY_PATH: '/opt/vk' };
    expect(missingVulkan(env, files([LOADER]))).toBe('no Vulkan driver: no ICD manifest in the vulkan/icd.d folders');
    expect(missingVulkan(env, files([LOADER, '/etc/vulkan/icd.d/nvidia_icd.json']))).toBeUndefined();
    expect(missingVulkan(env, files([LOADER, '/home/u/.local/share/vulkan/icd.d/x.json']))).toBeUndefined();
    expect(missingVulkan({ ...env, VK_ADD_DRIVER_FILES: '/opt/extra.json' }, files([LOADER, '/opt/extra.json']))).toBeUndefined();
  });
});

describe('probe reasons', () => {
  it("reads Dawn's and onnxruntime's messages as short reasons", () => {
    expect(probeFailure('', "Warning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file", 'x')).toBe('no Vulkan loader: libvulkan.so.1 could not be loaded');
    expect(probeFailure('', 'Warning: vkCreateInstance: Found no drivers!', 'x')).toBe('no Vulkan driver');
    expect(probeFailure('{"ok":false,"error":"webgpu_context.cc:136 … Failed to get a WebGPU adapter: No supported adapters\\n"}\n', '', 'x')).toBe('no WebGPU adapter');
    expect(probeFailure('', '', 'the probe exited with code 1')).toBe('the probe exited with code 1');
  });

  it('CUDA: its provider libraries beside the binding', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'meshnet-cuda-'));
    try {
      expect(missingCudaLibraries(dir)).toMatch(/^its libraries are not installed \(ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node\)$/);
      await writeFile(path.join(dir, 'libonnxruntime_providers_cuda.so'), '');
      expect(missingCudaLibraries(dir)).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("the child's embedded model is the Identity graph our ONNX writer makes", () => {
    const b = new GraphBuilder('probe');
    b.op('Identity', [b.input('x', OnnxType.FLOAT, [1])], {}, { outputs: ['y'] });
    b.output('y', OnnxType.FLOAT, [1]);
    // Read as text: importing the child would run its probe.
    const child = readFileSync(path.resolve(import.meta.dirname, '../../src/node/provider-probe-child.mjs'), 'utf8');
    const embedded = /IDENTITY_MODEL_BASE64 =\s*'([A-Za-z0-9+/=]+)'/.exec(child)?.[1];
    expect(Buffer.from(serializeModel(b.build())).toString('base64')).toBe(embedded);
  });

  it('describes what each process runs where', () => {
    const skipped = [
      { provider: 'cuda', reason: 'its attention needs --dtype fp16' },
      { provider: 'webgpu', reason: 'no Vulkan loader: libvulkan.so.1 not found' },
    ];
    expect(describeProviders('auto', 'cpu', skipped)).toBe('cpu (cuda skipped: its attention needs --dtype fp16; webgpu skipped: no Vulkan loader: libvulkan.so.1 not found)');
    expect(describeProviders('cpu', 'cpu', [])).toBe('cpu (--device cpu)');
  });
});

const swiftshader = '/usr/lib/chromium/vk_swiftshader_icd.json';
describe('--device auto on this machine', () => {
  // Skipped only where Chromium (and so its software Vulkan) is not installed; .ci/run installs it.
  it.skipIf(!existsSync(swiftshader))('tries WebGPU in a child on software Vulkan and keeps the verdict for child processes', async () => {
    const { autoProviders } = await import('../../src/node/ort-node-runtime.ts');
    const saved = { LD_LIBRARY_PATH: process.env.LD_LIBRARY_PATH, VK_ICD_FILENAMES: process.env.VK_ICD_FILENAMES };
    try {
      Object.assign(process.env, { LD_LIBRARY_PATH: '/usr/lib/chromium', VK_ICD_FILENAMES: swiftshader });
      expect(await autoProviders('fp32')).toEqual({ providers: ['webgpu', 'cpu'], skipped: [{ provider: 'cuda', reason: 'its attention needs --dtype fp16' }] });
      // The result is kept for worker threads and child processes, with the environment it holds for.
      expect(JSON.parse(process.env.MESHNET_PROVIDER_PROBE!)).toMatchObject({ results: { webgpu: { ok: true } } });
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
