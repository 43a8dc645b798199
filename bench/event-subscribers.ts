/**
 * `count` subscribers to every job's events, in a process of their own (the
 * `subscribers` benchmark starts it at nice 19; see bench/subscribers.ts).
 * Prints `ready` once each has seen an event (it submits probe jobs until
 * then), counts what they receive until its stdin closes, then prints one
 * JSON line: each subscriber's count since ready, the gaps, and its CPU
 * time from the ready line on, in ms.
 *
 *   node dist/bench/event-subscribers.js --port <client port> [--count 100]
 */
import { parseArgs } from 'node:util';
import { DtpClient } from '../src/client/index.js';
import { HOST } from './harness.js';
import { startSubscribers, type SubscriberReport } from './subscribers.js';

const { values } = parseArgs({
  options: { port: { type: 'string' }, count: { type: 'string', default: '100' } },
});
const client = await DtpClient.connect({ host: HOST, port: Number(values.port) });
const subs = await startSubscribers(client, Number(values.count));
const cpu = process.cpuUsage();
process.stdout.write('ready\n');
process.stdin.resume();
await new Promise((resolve) => process.stdin.once('end', resolve));
const used = process.cpuUsage(cpu);
const report: SubscriberReport = {
  received: subs.received(),
  gaps: subs.gaps(),
  cpuMs: (used.user + used.system) / 1_000,
};
await subs.stop();
await client.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
