#!/usr/bin/env node
// The `connector-store` command. This file is in the repository (dist/ is
// not), so npm links the command when it installs the workspace, before
// the first build; the command itself is dist/bundle/bin.js, dist/bin.js
// bundled with what it imports (scripts/bundle.mjs, run by `npm run build`
// and on prepack): a few files to load at each start instead of some 600
// modules.
import { fileURLToPath } from "node:url"

const entry = new URL("../dist/bundle/bin.js", import.meta.url)
try {
  await import(entry.href)
} catch (error) {
  if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes(fileURLToPath(entry))) throw error
  console.error(`connector-store: ${fileURLToPath(entry)} is not built yet: run \`npm run build\` (or \`npm start\`) in the repository first`)
  process.exitCode = 1
}
