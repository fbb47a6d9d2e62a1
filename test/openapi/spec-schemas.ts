/**
 * The official OpenAI OpenAPI description (`test/fixtures/openai-openapi/openapi.json`, OpenAPI
 * 3.1) as Ajv validators, one per component schema (`CreateChatCompletionResponse`,
 * `ResponseStreamEvent`, …), compiled on first use.
 *
 * The spec is not quite JSON Schema as Ajv compiles it, so it is converted once:
 * - `nullable: true` (an OpenAPI 3.0 leftover in 111 places) means "or null": the schema
 *   becomes `anyOf: [schema, { type: 'null' }]`;
 * - `$recursiveRef: '#'` (draft 2019-09, in the filter schemas) points at the enclosing
 *   component, so it becomes a plain `$ref` to it;
 * - `#/components/schemas/X` refs become `#/$defs/X` of one schema resource;
 * - `discriminator`, `example` and `x-*` keys are OpenAPI annotations and are dropped;
 *   formats (`unixtime`, …) are not checked;
 * - two 3.0 leftovers the spec still has: boolean `exclusiveMinimum`/`exclusiveMaximum`
 *   become 3.1's numbers, and a name repeated in one `required` list is listed once;
 * - Strict objects: every object schema that lists `properties` and says nothing about
 *   extra keys gets `unevaluatedProperties: false`, so a field the spec does not know (a
 *   typo, a field in the wrong object) fails too; so does a schema made of `allOf` members
 *   (`Response`), over all its members' keys. Schemas used as `allOf` members (or beside
 *   `properties` in a `$ref`) are left open, since their siblings add the other keys.
 *
 * Extensions meshnet answers with on purpose, as vLLM does, are added to their component
 * ({@link EXTENSIONS}): `Model.max_model_len` (the context in tokens). Nothing else is.
 *
 * One schema is added: {@link COMPLETION_STREAM_CHUNK}, because the spec's single
 * `CreateCompletionResponse` ("both the streamed and non-streamed response objects share the
 * same shape") has no null `finish_reason`, which every streamed chunk but the last carries on
 * api.openai.com (and in the `openai` SDK's own stream types).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

const SPEC_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/openai-openapi/openapi.json');
const SPEC_ID = 'https://meshnet.invalid/openai-openapi';
const REF_PREFIX = '#/components/schemas/';

type Json = unknown;
type JsonObject = Record<string, Json>;

const isObject = (value: Json): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Names of components that appear as an `allOf` member or a `$ref` beside `properties`. */
function openComponents(schemas: JsonObject): Set<string> {
  const open = new Set<string>();
  const walk = (node: Json): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (!isObject(node)) return;
    if (Array.isArray(node.allOf)) {
      for (const member of node.allOf) if (isObject(member) && typeof member.$ref === 'string') open.add(member.$ref.slice(REF_PREFIX.length));
    }
    if (typeof node.$ref === 'string' && node.properties !== undefined) open.add(node.$ref.slice(REF_PREFIX.length));
    Object.values(node).forEach(walk);
  };
  walk(schemas);
  return open;
}

function convert(node: Json, component: string, open: boolean): Json {
  if (Array.isArray(node)) return node.map((item) => convert(item, component, false));
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith('x-') || key === 'discriminator' || key === 'example' || key === 'nullable' || key === '$recursiveAnchor') continue;
    if (key === '$recursiveRef') {
      out.$ref = `#/$defs/${component}`;
    } else if (key === '$ref' && typeof value === 'string') {
      out.$ref = value.startsWith(REF_PREFIX) ? `#/$defs/${value.slice(REF_PREFIX.length)}` : value;
    } else if (key === 'properties' && isObject(value)) {
      // Property names are data, not keywords: convert each property's schema only.
      out.properties = Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, convert(schema, component, false)]));
    } else if (key === 'required' && Array.isArray(value)) {
      out.required = [...new Set(value)]; // the spec repeats a name in one place
    } else if (key === 'allOf' && Array.isArray(value)) {
      out.allOf = value.map((member) => convert(member, component, true));
    } else {
      out[key] = convert(value, component, false);
    }
  }
  // OpenAPI 3.0's boolean `exclusiveMinimum: true` beside `minimum` is 3.1's number form.
  for (const [flag, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']] as const) {
    if (typeof out[flag] === 'boolean') {
      if (out[flag] === true) out[flag] = out[bound];
      else delete out[flag];
      if (out[flag] !== undefined) delete out[bound];
    }
  }
  const refWithProperties = typeof out.$ref === 'string' && out.properties !== undefined;
  const objectLike = isObject(out.properties) || Array.isArray(out.allOf);
  if (!open && !refWithProperties && objectLike && out.additionalProperties === undefined && out.unevaluatedProperties === undefined) {
    out.unevaluatedProperties = false;
  }
  if (node.nullable === true) return { anyOf: [out, { type: 'null' }] };
  return out;
}

/** `CreateCompletionResponse` whose choices may carry `finish_reason: null` (stream chunks). */
export const COMPLETION_STREAM_CHUNK = 'MeshnetCompletionStreamChunk';

/** Fields meshnet adds to a component on purpose (vLLM's names), with their schemas. */
export const EXTENSIONS: Record<string, JsonObject> = {
  Model: { max_model_len: { type: 'integer', minimum: 1 } },
};

/** The spec's component schemas, converted (see the file comment). */
export function loadSpecSchemas(specPath = SPEC_PATH): JsonObject {
  const spec = JSON.parse(readFileSync(specPath, 'utf8')) as { components: { schemas: JsonObject } };
  const schemas = spec.components.schemas;
  const open = openComponents(schemas);
  const converted = Object.fromEntries(Object.entries(schemas).map(([name, schema]) => [name, convert(schema, name, open.has(name))]));
  const chunk = structuredClone(converted.CreateCompletionResponse) as JsonObject;
  const choice = ((chunk.properties as JsonObject).choices as JsonObject).items as JsonObject;
  const properties = choice.properties as JsonObject;
  properties.finish_reason = { anyOf: [properties.finish_reason, { type: 'null' }] };
  converted[COMPLETION_STREAM_CHUNK] = chunk;
  for (const [component, fields] of Object.entries(EXTENSIONS)) {
    const schema = converted[component] as JsonObject;
    schema.properties = { ...(schema.properties as JsonObject), ...fields };
  }
  return converted;
}

let ajv: Ajv2020 | undefined;
const validators = new Map<string, ValidateFunction>();

/** The Ajv validator of one component schema (compiled once per process). */
export function specValidator(component: string): ValidateFunction {
  let validate = validators.get(component);
  if (validate) return validate;
  if (!ajv) {
    ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false, validateSchema: false });
    ajv.addSchema({ $id: SPEC_ID, $defs: loadSpecSchemasOnce() });
  }
  validate = ajv.getSchema(`${SPEC_ID}#/$defs/${component}`);
  if (!validate) throw new Error(`the OpenAI spec has no component schema '${component}'`);
  validators.set(component, validate);
  return validate;
}

/** Ajv's errors as short readable lines (`/choices/0/logprobs: must be null`). */
export function describeErrors(errors: readonly ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 8)
    .map((e) => `${e.instancePath || '/'}: ${e.message ?? e.keyword}${e.keyword === 'unevaluatedProperties' ? ` (${String(e.params.unevaluatedProperty)})` : ''}`)
    .join('; ');
}

let members: Map<string, Map<string, string>> | undefined;

/**
 * For a union of `$ref`s told apart by a one-value `type` enum (`ResponseStreamEvent`,
 * `OutputItem`, …): the member component for `type`, so errors name that member's fields
 * instead of every member's.
 */
function memberFor(component: string, value: unknown): string | undefined {
  members ??= new Map();
  let byType = members.get(component);
  if (!byType) {
    byType = new Map();
    const schemas = loadSpecSchemasOnce();
    const union = schemas[component] as JsonObject | undefined;
    for (const member of [...((union?.anyOf as JsonObject[] | undefined) ?? []), ...((union?.oneOf as JsonObject[] | undefined) ?? [])]) {
      const name = typeof member.$ref === 'string' ? member.$ref.slice('#/$defs/'.length) : undefined;
      const type = name ? (((schemas[name] as JsonObject | undefined)?.properties as JsonObject | undefined)?.type as JsonObject | undefined) : undefined;
      const values = type?.enum;
      if (name && Array.isArray(values) && values.length === 1 && typeof values[0] === 'string') byType.set(values[0], name);
    }
    members.set(component, byType);
  }
  const type = isObject(value) ? value.type : undefined;
  return typeof type === 'string' ? byType.get(type) : undefined;
}

let loaded: JsonObject | undefined;
function loadSpecSchemasOnce(): JsonObject {
  loaded ??= loadSpecSchemas();
  return loaded;
}

/** Errors of `value` against component `component`, or undefined when it conforms. */
export function specErrors(component: string, value: unknown): string | undefined {
  const validate = specValidator(component);
  if (validate(value)) return undefined;
  const member = memberFor(component, value);
  if (member) {
    const exact = specValidator(member);
    if (!exact(value)) return `(as ${member}) ${describeErrors(exact.errors)}`;
  }
  return describeErrors(validate.errors);
}
