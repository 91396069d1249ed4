/**
 * Declares the suites of another test file again in the calling file, under
 * the adapter the caller chose (`useMemoryPortsOnly`, `useStockSqliteOnly`).
 * A test worker keeps the modules it loaded from one file to the next
 * (vitest.config.ts), so a plain import of a file the worker already ran
 * would declare nothing; the query makes each re-run a module of its own.
 * `path` is relative to test/, as `./cas.test.js`.
 */
export const rerunSuites = async (path: string, run: string): Promise<void> => {
  await import(/* @vite-ignore */ `${new URL(`../${path}`, import.meta.url).href}?rerun=${run}`)
}
