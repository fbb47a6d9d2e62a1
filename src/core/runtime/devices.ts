/**
 * Device names users pass (`--device`) and the execution providers each runtime tries for
 * them, in order. One table per runtime; unknown names get an error listing the valid ones.
 */
export type DeviceTable = Readonly<Record<string, readonly string[]>>;

export class UnknownDeviceError extends Error {
  override readonly name = 'UnknownDeviceError';
  constructor(device: string, table: DeviceTable) {
    super(`unknown device '${device}': expected one of ${Object.keys(table).join(', ')}`);
  }
}

export function providersFor(table: DeviceTable, device: string): readonly string[] {
  const providers = table[device];
  if (!providers) throw new UnknownDeviceError(device, table);
  return providers;
}
