#!/usr/bin/env node
// Prints one field of the JSON document on standard input, for the shell
// scripts: `json-field.mjs attempts.1.workerId`. An object or array prints
// as JSON, a missing field as an empty line.
let text = '';
process.stdin.on('data', (chunk) => (text += chunk));
process.stdin.on('end', () => {
  let value = JSON.parse(text);
  for (const key of (process.argv[2] ?? '').split('.')) value = value?.[key];
  console.log(value == null ? '' : typeof value === 'object' ? JSON.stringify(value) : value);
});
