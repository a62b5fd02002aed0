/**
 * The sender of priority-under-load, in a process of its own: the harness's event loop also runs
 * the webhook receivers and the backlog's client, and their work would delay these requests and
 * their timing. Reads its task from BENCH_PRIORITY (JSON: url, apiKey, intervalMs, callback,
 * phones), sends one single message per interval (each when it is due, on a pool large enough
 * never to hold one back), and prints one line `{"event":"done","sends":[…]}` before it exits.
 */
import { Client } from './load.js';

interface Task {
  url: string;
  apiKey: string;
  intervalMs: number;
  callback: string;
  phones: string[];
}

const task = JSON.parse(process.env.BENCH_PRIORITY ?? '{}') as Task;
const client = new Client(task.url, 64, { 'x-api-key': task.apiKey });
const sends: Array<{ phone: string; sentAt: number; acceptMs: number; status: number }> = [];
const pending: Array<Promise<void>> = [];
const start = Date.now();
for (const [j, phone] of task.phones.entries()) {
  const wait = start + j * task.intervalMs - Date.now();
  if (wait > 0) {
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  const body = JSON.stringify({ body: `Your code is ${100000 + j}`, to: [{ phone_number: `+${phone}` }], tag: 'priority', callback: task.callback });
  const sentAt = Date.now();
  pending.push(client.request('POST', '/v2/message', body).then(
    (res) => void sends.push({ phone, sentAt, acceptMs: res.ms, status: res.status }),
    () => void sends.push({ phone, sentAt, acceptMs: Number.NaN, status: 0 }),
  ));
}
await Promise.all(pending);
await client.pool.close();
process.stdout.write(`${JSON.stringify({ event: 'done', sends })}\n`);
