/**
 * Errors are data: a stable machine code, an HTTP status and a safe message. Each API family's
 * error middleware turns them into its own body shape (sending API `{Message}`, REST
 * `{success:false,message}`, verification `{error,message}`, XML error documents).
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, code = 'BAD_REQUEST', extra?: Record<string, unknown>) =>
  new AppError(400, code, message, extra);
export const notFound = (message: string, code = 'NOT_FOUND') => new AppError(404, code, message);
export const forbidden = (message: string) => new AppError(403, 'FORBIDDEN', message);
export const unauthorized = (message: string, code = 'UNAUTHORIZED') => new AppError(401, code, message);
export const conflict = (message: string) => new AppError(409, 'CONFLICT', message);

/** The default of an exhaustive `switch`: the compiler proves it unreachable, and it throws if a value slips through anyway. */
export function assertUnreachable(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}
