// Runs named checks one after the other, prints `ok - name` / `not ok - name` with the error,
// and exits 1 when any failed.
export async function runChecks(checks) {
  let failed = 0;
  for (const [name, check] of Object.entries(checks)) {
    try {
      await check();
      console.log(`ok - ${name}`);
    } catch (error) {
      failed += 1;
      console.log(`not ok - ${name}\n${error.stack ?? error}`);
    }
  }
  if (failed > 0) {
    console.error(`${failed} check(s) failed`);
    process.exit(1);
  }
}
