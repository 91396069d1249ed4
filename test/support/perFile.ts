import { startTestFile } from "./databases.js"
import { startTestFilePrefixes } from "./pgPrefixes.js"
import { startTestFileAdapters } from "./stores.js"

// The setup file vitest runs before every test file (vitest.config.ts). A
// worker runs several test files one after another and, where the config
// does not isolate them, keeps the support modules loaded between them: each
// file starts here with a database, a temp folder, table prefixes and
// adapters of its own, and with the hooks that clean them up when it ends.
// The afterAll hooks registered here run after the file's own (vitest runs
// them in the reverse order of registration), once its stores are closed.
startTestFile()
startTestFilePrefixes()
startTestFileAdapters()
