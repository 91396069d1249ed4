#!/usr/bin/env node
// Bundles the `connector-store` command (dist/bin.js, after tsc) into
// dist/bundle/, which bin/connector-store.js runs. Loading the unbundled
// dist/ costs the CLI some 600 ESM modules (effect, @effect/cli, fast-check
// through effect/Schema) at each start; the bundle is a few files.
//
//   node scripts/bundle.mjs     # from packages/cli, or: npm run build at the root, npm pack here (prepack)
//
// - Only the command is bundled: dist/index.js (the package's library
//   export) stays unbundled, so an app that imports it keeps one copy of
//   Effect. The command is a process of its own, so its bundle carries its
//   own copy.
// - The native drivers and the packages that reach into them (DRIVERS) stay
//   external, each with its subpaths, and resolve from the installed
//   dependencies as before. A bundled package that ships a native addon
//   fails the build: add it to DRIVERS.
// - Code splitting keeps the lazy `import()`s lazy: `--help` loads the
//   command tree only; a command's store, drivers and the simulation are
//   chunks loaded when it runs.
// - The simulation's child process (simulation/dist/child.js, which the
//   simulation forks from `./child.js` beside its own module) is an entry
//   of the bundle too, beside the chunks.
// - A `require` made with createRequire heads each file: bundled CommonJS
//   that requires a Node built-in or an external needs a real one in ESM.
// - The licenses of the bundled packages go in dist/bundle/LICENSES.txt.
import { build } from "esbuild"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"

const cli = dirname(dirname(fileURLToPath(import.meta.url)))
const outdir = join(cli, "dist", "bundle")
const resolveFrom = createRequire(join(cli, "package.json"))
const simulation = dirname(resolveFrom.resolve("@connector-store/simulation/package.json"))

/** Native drivers, and the packages that require their internals: left to Node to resolve at run time. */
const DRIVERS = ["better-sqlite3", "bindings", "pg", "pg-native", "pg-cursor", "libpq"]

const entryPoints = { bin: join(cli, "dist", "bin.js"), child: join(simulation, "dist", "child.js") }
for (const [name, file] of Object.entries(entryPoints)) {
  if (!existsSync(file)) throw new Error(`bundle: ${file} (the ${name} entry) is not built: run tsc first (npm run build at the root)`)
}

rmSync(outdir, { recursive: true, force: true })
const started = Date.now()
const result = await build({
  entryPoints,
  outdir,
  entryNames: "[name]",
  chunkNames: "chunk-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: DRIVERS.flatMap((name) => [name, `${name}/*`]),
  banner: { js: 'import { createRequire as __connectorStoreRequire } from "node:module";\nconst require = __connectorStoreRequire(import.meta.url);' },
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "eof",
  metafile: true,
  logLevel: "warning"
})

/** The package directory (under node_modules) of a bundled input, or undefined for the workspace's own files. */
const packageOf = (input) => {
  const parts = input.split(/[\\/]/)
  const at = parts.lastIndexOf("node_modules")
  if (at < 0) return undefined
  const name = parts[at + 1]?.startsWith("@") ? parts.slice(at + 1, at + 3).join("/") : parts[at + 1]
  return join(...parts.slice(0, at + 1), ...name.split("/"))
}
const bundled = new Set(Object.keys(result.metafile.inputs).map(packageOf).filter((dir) => dir !== undefined))
const hasAddon = (dir) => readdirSync(dir, { withFileTypes: true, recursive: true }).some((entry) => entry.isFile() && entry.name.endsWith(".node"))
const native = [...bundled].filter((dir) => {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
  return manifest.gypfile === true || existsSync(join(dir, "binding.gyp")) || hasAddon(dir)
})
if (native.length > 0) {
  rmSync(outdir, { recursive: true, force: true })
  throw new Error(`bundle: ${native.join(", ")} ship${native.length === 1 ? "s" : ""} a native addon: add ${native.length === 1 ? "it" : "them"} to DRIVERS in ${relative(process.cwd(), fileURLToPath(import.meta.url))}`)
}

// Each bundled package's name, version and license text: a copy of its code ships in the bundle.
const notices = [...bundled].sort().map((dir) => {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
  const file = readdirSync(dir).find((name) => /^(licen[sc]e|copying)(\.|$)/i.test(name))
  const text = file === undefined ? `(no license file; package.json says ${manifest.license ?? "nothing"})` : readFileSync(join(dir, file), "utf8").trim()
  return `${manifest.name} ${manifest.version} (${manifest.license ?? "no license field"})\n\n${text}\n`
})
writeFileSync(join(outdir, "LICENSES.txt"), `The connector-store command's bundle carries code of these packages:\n\n${notices.join(`\n${"-".repeat(72)}\n\n`)}`)

const outputs = Object.entries(result.metafile.outputs)
const bytes = outputs.reduce((sum, [, output]) => sum + output.bytes, 0)
console.log(`bundle: ${relative(process.cwd(), outdir) || "."}${sep}: ${outputs.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB, from ${Object.keys(result.metafile.inputs).length} modules (${Date.now() - started} ms)`)
