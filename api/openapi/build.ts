/**
 * Building OpenAPI 3.1 documents from Joi schemas (joi-to-json): request bodies and query
 * parameters from the schemas the handlers validate with, answers from the response schemas in
 * `schemas.ts`, which the tests hold against real answers (test/api/openapi.test.ts).
 */
import { createRequire } from 'node:module';
import type Joi from 'joi';

// A CommonJS module whose typings declare an ES default export: loaded as what it is.
const parse = createRequire(import.meta.url)('joi-to-json') as (schema: Joi.Schema, mode: string) => unknown;

export type JsonSchema = Record<string, unknown>;

export function jsonSchema(schema: Joi.Schema): JsonSchema {
  return parse(schema, 'open-api-3.1') as JsonSchema;
}

export type Security = Array<Record<string, string[]>>;

export interface Answer {
  description: string;
  /** A Joi schema of a JSON answer, a JSON schema, or none (no body). */
  schema?: Joi.Schema | JsonSchema;
  /** Media type (default application/json). */
  type?: string;
  headers?: Record<string, { description: string; schema: JsonSchema }>;
}

export interface Operation {
  summary: string;
  description?: string;
  tags?: string[];
  security?: Security;
  /** Path parameters by name (their place in the path is `{name}`). */
  path?: Record<string, { description: string; schema?: JsonSchema }>;
  /** Query parameters: the keys of a Joi object. */
  query?: Joi.ObjectSchema;
  /** Optional request headers by name. */
  headers?: Record<string, { description: string; schema: JsonSchema }>;
  body?: { schema: Joi.Schema | JsonSchema; type?: string; required?: boolean; description?: string };
  /** A 413 is listed only when the operation has a `body`: a call that reads none cannot send one (see `operation`). */
  responses: Record<number, Answer>;
}

/**
 * A body over the cap (413) comes only from reading one (api/middleware/body.ts), and only handlers
 * whose operation documents a `body` read one: an operation without a body (a GET, a DELETE) never
 * lists 413, even when it shares its family's error answers with the calls that read one.
 */
const answersOf = (op: Operation): Array<[string, Answer]> => Object.entries(op.responses).filter(([status]) => op.body !== undefined || status !== '413');

function isJoi(value: unknown): value is Joi.Schema {
  return typeof value === 'object' && value !== null && 'describe' in value && typeof (value as { describe: unknown }).describe === 'function' && '$_root' in value;
}

const schemaOf = (s: Joi.Schema | JsonSchema): JsonSchema => (isJoi(s) ? jsonSchema(s) : s);

function queryParameters(query: Joi.ObjectSchema): JsonSchema[] {
  const keys = (query.describe() as { keys?: Record<string, { flags?: { presence?: string; description?: string } }> }).keys ?? {};
  return Object.entries(keys).map(([name, described]) => {
    const schema = jsonSchema(query.extract(name));
    const { description, ...rest } = schema as { description?: string };
    return {
      name, in: 'query', required: described.flags?.presence === 'required', schema: rest,
      ...(description !== undefined && { description }),
    };
  });
}

export function operation(op: Operation): JsonSchema {
  const parameters = [
    ...Object.entries(op.path ?? {}).map(([name, p]) => ({ name, in: 'path', required: true, description: p.description, schema: p.schema ?? { type: 'string' } })),
    ...(op.query ? queryParameters(op.query) : []),
    ...Object.entries(op.headers ?? {}).map(([name, h]) => ({ name, in: 'header', required: false, description: h.description, schema: h.schema })),
  ];
  return {
    summary: op.summary,
    ...(op.description !== undefined && { description: op.description }),
    ...(op.tags && { tags: op.tags }),
    ...(op.security && { security: op.security }),
    ...(parameters.length > 0 && { parameters }),
    ...(op.body && {
      requestBody: {
        required: op.body.required ?? true,
        ...(op.body.description !== undefined && { description: op.body.description }),
        content: { [op.body.type ?? 'application/json']: { schema: schemaOf(op.body.schema) } },
      },
    }),
    responses: Object.fromEntries(answersOf(op).map(([status, answer]) => [status, {
      description: answer.description,
      ...(answer.headers && { headers: answer.headers }),
      ...(answer.schema && { content: { [answer.type ?? 'application/json']: { schema: schemaOf(answer.schema) } } }),
    }])),
  };
}

export interface DocumentSpec {
  title: string;
  description: string;
  securitySchemes?: Record<string, JsonSchema>;
  security?: Security;
  paths?: Record<string, Record<string, Operation>>;
  webhooks?: Record<string, Record<string, Operation>>;
}

export function document(spec: DocumentSpec, version: string, serverUrl: string): JsonSchema {
  const ops = (group: Record<string, Record<string, Operation>>) =>
    Object.fromEntries(Object.entries(group).map(([path, methods]) => [path, Object.fromEntries(Object.entries(methods).map(([m, op]) => [m, operation(op)]))]));
  return {
    openapi: '3.1.0',
    info: { title: spec.title, version, description: spec.description },
    servers: [{ url: serverUrl }],
    ...(spec.security && { security: spec.security }),
    ...(spec.paths && { paths: ops(spec.paths) }),
    ...(spec.webhooks && { webhooks: ops(spec.webhooks) }),
    ...(spec.securitySchemes && { components: { securitySchemes: spec.securitySchemes } }),
  };
}
