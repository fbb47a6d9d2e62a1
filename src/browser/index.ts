/** meshnet for browsers: the core engine plus onnxruntime-web. */
export * from '../core/index.ts';
export { BROWSER_DEVICES, browserLoaderOptions } from './ort-web-runtime.ts';
