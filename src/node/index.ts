/** meshnet for Node: the core engine plus Node's files, onnxruntime-node and artifact cache. */
export * from '../core/index.ts';
export { createFileByteSource } from './file-byte-source.ts';
export { getShardArtifact } from './artifact-cache.ts';
export { loadLocalPipeline, openLocalModel, openLocalTokenizer } from './local-model.ts';
export { NODE_DEVICES, nodeLoaderOptions } from './ort-node-runtime.ts';
export { loadTokenizer } from './tokenizer-files.ts';
export { startHead, startPeer, type MeshnetHead, type MeshnetPeer, type StartHeadOptions, type StartPeerOptions } from './library/start.ts';
