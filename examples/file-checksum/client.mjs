// Submits a checksum job for each file named on the command line, waits for
// them, and prints one line per file. Run it beside a coordinator and a
// worker that loaded ./tasks.mjs:
//
//   node client.mjs [--host localhost] [--port 7071] FILE...
import { DtpClient } from 'dtp';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const [, value] = args.splice(at, 2);
  return value;
};
const host = option('host', 'localhost');
const port = Number(option('port', '7071'));
if (args.length === 0) {
  console.error('usage: node client.mjs [--host h] [--port p] FILE...');
  process.exit(2);
}

const client = await DtpClient.connect({ host, port });
try {
  const jobs = await Promise.all(
    args.map((path) =>
      client.submit({ taskType: 'files.checksum', payload: { path }, timeoutMillis: 60_000 }),
    ),
  );
  let failed = 0;
  for (const [i, { jobId }] of jobs.entries()) {
    const job = await client.wait(jobId, 120_000);
    if (job.state === 'COMPLETED') {
      // A non-string result arrives as JSON text (job.resultFormat === 'json').
      const { digest, bytes, algorithm } = JSON.parse(job.result);
      console.log(`${digest}  ${args[i]}  (${bytes} bytes, ${algorithm})`);
    } else {
      failed++;
      console.log(`${job.state}  ${args[i]}: ${job.error}`);
    }
  }
  process.exitCode = failed === 0 ? 0 : 1;
} finally {
  await client.close();
}
