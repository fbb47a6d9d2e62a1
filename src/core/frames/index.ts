/** Activation frames: the binary codec between head and peers. Pure; no runtime imports. */

export { decodeFrame, encodeFrame, type ActivationFrame } from './frame-codec.ts';
export { assertFiniteActivations } from './finite-activations.ts';
export { readSessionId, writeSessionId } from './session-id.ts';
