/**
 * The container image's HEALTHCHECK: asks this container's process for `/health/ready` on its
 * METRICS_PORT listener (every role of docker-compose.yml has one), else on PORT (web, all).
 * Exit 0 healthy, 1 not (Postgres or Redis unreachable, or no answer within 4 s).
 */
const port = process.env.METRICS_PORT || process.env.PORT || '8080';
try {
  const res = await fetch(`http://127.0.0.1:${port}/health/ready`, { signal: AbortSignal.timeout(4000) });
  process.exitCode = res.ok ? 0 : 1;
} catch {
  process.exitCode = 1;
}
