import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isStorageUnavailable, StorageUnavailableError } from '../../shared/storage-unavailable.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

test('errors that mean Postgres or Redis cannot be reached are storage outages', () => {
  const table: Array<[string, unknown]> = [
    ['connection refused', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['connection reset', withCode('read ECONNRESET', 'ECONNRESET')],
    ['host unreachable', withCode('connect EHOSTUNREACH', 'EHOSTUNREACH')],
    ['a Unix socket that is gone', withCode('connect ENOENT /var/run/postgresql/.s.PGSQL.5432', 'ENOENT')],
    ['every address of localhost refused', new AggregateError([withCode('a', 'ECONNREFUSED'), withCode('b', 'ECONNREFUSED')], '')],
    ['pg-pool connect timeout', new Error('timeout exceeded when trying to connect')],
    ['pg connection terminated', new Error('Connection terminated unexpectedly')],
    ['pg connection timeout', new Error('Connection terminated due to connection timeout', { cause: new Error('x') })],
    ['pg client broken', new Error('Client has encountered a connection error and is not queryable')],
    ['57P01 admin_shutdown', withCode('terminating connection due to administrator command', '57P01')],
    ['57P02 crash_shutdown', withCode('terminating connection because of crash of another server process', '57P02')],
    ['57P03 cannot_connect_now', withCode('the database system is starting up', '57P03')],
    ['08006 connection_failure', withCode('connection failure', '08006')],
    ['08001 unable to connect', withCode('could not connect', '08001')],
    ['53300 too many connections', withCode('sorry, too many clients already', '53300')],
    ['ioredis connection closed', new Error('Connection is closed.')],
    ['ioredis offline queue off', new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    ['ioredis max retries', Object.assign(new Error('Reached the max retries per request limit (which is 20). Refer to "maxRetriesPerRequest" option for details.'), { name: 'MaxRetriesPerRequestError' })],
    ['ioredis connect timeout', new Error('connect ETIMEDOUT')],
    ['our own marker', new StorageUnavailableError('redis', 'not connected')],
    ['an outage wrapped as a cause', new Error('enqueue failed', { cause: withCode('connect ECONNREFUSED', 'ECONNREFUSED') })],
  ];
  for (const [name, err] of table) {
    assert.equal(isStorageUnavailable(err), true, name);
  }
});

test('request errors, constraint violations and program errors are not storage outages', () => {
  const table: Array<[string, unknown]> = [
    ['unique violation', withCode('duplicate key value violates unique constraint', '23505')],
    ['numeric overflow', withCode('numeric field overflow', '22003')],
    ['NUL in text', withCode('invalid byte sequence for encoding "UTF8": 0x00', '22021')],
    ['timestamp out of range', withCode('timestamp out of range', '22008')],
    ['serialization failure', withCode('could not serialize access', '40001')],
    ['statement timeout', withCode('canceling statement due to statement timeout', '57014')],
    ['disk full', withCode('could not extend file', '53100')],
    ['a type error', new TypeError('Cannot read properties of undefined')],
    ['a URIError', new URIError('URI malformed')],
    ['an AggregateError with one program error', new AggregateError([withCode('a', 'ECONNREFUSED'), new TypeError('b')], '')],
    ['an empty AggregateError', new AggregateError([], '')],
    ['a Node error code that is not about the network', withCode('x', 'ERR_INVALID_ARG_TYPE')],
    ['a string', 'ECONNREFUSED'],
    ['null', null],
    ['undefined', undefined],
  ];
  for (const [name, err] of table) {
    assert.equal(isStorageUnavailable(err), false, name);
  }
});

test('a cause chain that loops on itself ends', () => {
  const err = new Error('outer') as Error & { cause?: unknown };
  err.cause = err;
  assert.equal(isStorageUnavailable(err), false);
});
