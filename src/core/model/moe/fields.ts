/** What the MoE, gpt-oss and YaRN parsers need from config.ts's field reader (errors name the file and field). */
export interface MoeFields {
  fail(field: string, problem: string): never;
  raw(field: string): unknown;
  positiveInt(field: string, fallback?: number): number;
  positiveNumber(field: string, fallback?: number): number;
  boolean(field: string, fallback: boolean): boolean;
}
