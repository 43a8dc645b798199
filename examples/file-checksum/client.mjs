// Submits a checksum job for each file named on the command line, waits for
// them, and prints one line per file. Run it beside a coordinator and a
// worker that loaded ./tasks.mjs:
//
//   node client.mjs [--host localhost] [--port 7071] FILE...
import { JobFailedError, connect } from 'dtp';

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

const client = await connect({ host, port });
try {
  const jobs = await Promise.all(
    args.map((path) => client.submit('files.checksum', { path }, { timeoutMillis: 60_000 })),
  );
  let failed = 0;
  for (const [i, job] of jobs.entries()) {
    try {
      // The handler's value, as it returned it (a JobFailedError if the job failed).
      const { digest, bytes, algorithm } = await job.result({ timeoutMs: 120_000 });
      console.log(`${digest}  ${args[i]}  (${bytes} bytes, ${algorithm})`);
    } catch (err) {
      if (!(err instanceof JobFailedError)) throw err;
      failed++;
      console.log(`FAILED  ${args[i]}: ${err.jobError}`);
    }
  }
  process.exitCode = failed === 0 ? 0 : 1;
} finally {
  await client.close();
}
