// A node:test reporter that writes only the failed tests: file, name and
// error (an assertion's message, its values and the first lines of its
// stack, without Node's own frames). scripts/run-tests.mjs runs it beside the spec reporter and prints
// what it wrote once every suite has ended, so the end of a long run's
// output says why a test failed, not only that it did.
//
// A suite that failed only because tests in it failed is left out: those
// tests are listed themselves.

/** How many lines of an error are kept: enough for a message, its values and where it came from. */
const ERROR_LINES = 40;

function errorText(error) {
  // node:test wraps what a test threw: the cause is the test's own error.
  const thrown =
    error?.code === 'ERR_TEST_FAILURE' && error.cause !== undefined ? error.cause : error;
  const text =
    thrown instanceof Error
      ? (thrown.stack ?? `${thrown.name}: ${thrown.message}`)
      : String(thrown);
  // Node's own frames (the test runner's) say nothing of the failure.
  const lines = text
    .split('\n')
    .filter((line) => !/^\s*at .*(\(node:|\bnode:internal|Promise\.all)/.test(line));
  const kept = lines.slice(0, ERROR_LINES);
  if (lines.length > kept.length) kept.push(`… (${lines.length - kept.length} more lines)`);
  return kept.map((line) => `    ${line}`).join('\n');
}

export default async function* failuresReporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { name, file, details } = event.data;
    if (details?.error?.failureType === 'subtestsFailed') continue;
    yield `✖ ${name}\n    in ${file ?? 'an unknown file'}\n${errorText(details?.error)}\n\n`;
  }
}
