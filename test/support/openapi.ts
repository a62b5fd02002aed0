/**
 * Holding real answers against the OpenAPI documents: the operation is found by method and path
 * (templates `{name}` match one segment), the answer's status must be documented, its media type
 * must be the documented one and its body must validate against the documented schema (ajv, JSON
 * Schema 2020-12 as OpenAPI 3.1 uses it, formats checked).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
const compiled = new WeakMap<object, ValidateFunction>();

function templateMatches(template: string, path: string): boolean {
  const re = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}|\{[^}]+\}/g, '[^/]+')}$`);
  return re.test(path);
}

export interface Checked {
  family: string;
  method: string;
  template: string;
  status: number;
}

export class OpenApiChecker {
  readonly seen: Checked[] = [];

  constructor(private readonly documents: Record<string, Doc>) {}

  /** The documented operation of `method path` in `family`, or a failure naming what is missing. */
  private operation(family: string, method: string, path: string): { template: string; op: Doc } {
    const paths = this.documents[family]?.paths ?? {};
    const template = Object.keys(paths).find((t) => templateMatches(t, path.split('?')[0]!));
    if (!template) throw new Error(`${family}: ${path} is not documented`);
    const op = paths[template][method.toLowerCase()];
    if (!op) throw new Error(`${family}: ${method} ${template} is not documented`);
    return { template, op };
  }

  /** Throws when the answer does not fit the document. */
  check(family: string, method: string, path: string, status: number, contentType: string | undefined, body: unknown): void {
    const { template, op } = this.operation(family, method, path);
    const answer = op.responses?.[String(status)];
    if (!answer) throw new Error(`${family}: ${method} ${template} answered ${status}, which is not documented (documented: ${Object.keys(op.responses).join(', ')})`);
    this.seen.push({ family, method: method.toUpperCase(), template, status });
    const content = answer.content as Record<string, { schema: object }> | undefined;
    if (!content) return;
    const [type, media] = Object.entries(content)[0]!;
    if (!(contentType ?? '').startsWith(type)) throw new Error(`${family}: ${method} ${template} ${status}: content-type ${contentType}, documented ${type}`);
    this.validate(media.schema, body, `${family}: ${method} ${template} ${status}`);
  }

  /** Validates a body against a schema of the documents (a webhook's request body, say). */
  validate(schema: object, body: unknown, what: string): void {
    let validate = compiled.get(schema);
    if (!validate) {
      validate = ajv.compile(schema);
      compiled.set(schema, validate);
    }
    if (!validate(body)) {
      throw new Error(`${what}: ${ajv.errorsText(validate.errors, { separator: '; ' })}\nbody: ${JSON.stringify(body).slice(0, 1500)}`);
    }
  }

  /** Documented operations (method template) of a family that no check has exercised. */
  unexercised(family: string): string[] {
    const out: string[] = [];
    for (const [template, methods] of Object.entries(this.documents[family]?.paths ?? {})) {
      for (const method of Object.keys(methods as object)) {
        if (!this.seen.some((s) => s.family === family && s.template === template && s.method === method.toUpperCase())) out.push(`${method.toUpperCase()} ${template}`);
      }
    }
    return out;
  }
}
