#!/usr/bin/env node
// The packages as a user gets them: packs every published workspace package
// (each builds on prepack), checks what each tarball ships, then takes every
// `npm install` line of the package READMEs and of the docs that recommend
// one (```sh blocks) as it is written and resolves each in a fresh app: no
// ERESOLVE, no "overriding peer" warning, one effect of the 3.x line. It
// then runs all those lines, one after the other, in one more fresh app,
// type-checks it with strict TypeScript (NodeNext,
// exactOptionalPropertyTypes, skipLibCheck off, so every shipped .d.ts must
// compile with what the lines install) and runs it on memory, SQLite and
// Postgres through the Promise and the Effect APIs, and the installed CLI.
// It packs a copy of the packages (see `stageWorkspace`), never touching
// the workspace's own dist/, so it can run beside the tests.
// Then the two apps the Promise package (`@connector-store/promise`, which
// brings its own Effect 3 line) is for: one on Effect 4 from the registry,
// where every Effect-API line of the READMEs must fail with ERESOLVE and
// leave the app's effect and package.json as they were, and the Promise
// line must install beside it (the app's `node_modules/effect` stays 4.x)
// and run on SQLite and Postgres, each rejection keeping its `_tag`, also
// through Effect 4's own `Effect.tryPromise`/`catchTag`
// (test/packaging/any-app/); and one with no Effect at all.
// A line's `@connector-store/<name>` is the packed tarball (with the tarballs
// of the connector-store packages it depends on, which would come from the
// registry). The temporary apps (and the Postgres database) are removed at
// the end, also on failure.
//
//   node .ci/packed-install.mjs                    # the workspace's versions
//   node .ci/packed-install.mjs --effect 3.19.0    # core + memory-adapter on an older effect
//   node .ci/packed-install.mjs --install-scripts  # build better-sqlite3 as npm would (see below)
//   node .ci/packed-install.mjs --lines-only       # only resolve each install line in a fresh app
//   node .ci/packed-install.mjs --native-status F  # the workspace's install scripts still run: wait for F (their exit status)
//
// Without --install-scripts the app is installed with --ignore-scripts and
// gets the workspace's own better-sqlite3 binary (same version, same Node),
// because without access to its prebuilt binaries npm compiles it from
// source for minutes; none of the installed packages needs another script.
//
// Postgres: CONNECTOR_STORE_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres);
// skipped with a warning when it does not answer, an error with CONNECTOR_STORE_REQUIRE_PG=1.
import { execFileSync, spawnSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const effectAt = process.argv.indexOf("--effect")
const olderEffect = effectAt > 0 ? process.argv[effectAt + 1] : undefined
const installScripts = process.argv.includes("--install-scripts")
const linesOnly = process.argv.includes("--lines-only")
const nativeAt = process.argv.indexOf("--native-status")
const nativeStatus = nativeAt > 0 ? process.argv[nativeAt + 1] : undefined
const pgAdminUrl = process.env.CONNECTOR_STORE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const pgRequired = process.env.CONNECTOR_STORE_REQUIRE_PG === "1"

const readJson = (path) => JSON.parse(readFileSync(path, "utf8"))
const run = (command, args, cwd, env = process.env) => {
  const started = Date.now()
  const out = execFileSync(command, args, { cwd, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
  console.log(`$ ${command} ${args.join(" ")}  (${((Date.now() - started) / 1000).toFixed(1)} s)`)
  return out
}
const fail = (message) => {
  throw new Error(`packed install: ${message}`)
}

const rootPackage = readJson(join(root, "package.json"))
const pinned = rootPackage.devDependencies
const published = rootPackage.workspaces
  .map((dir) => ({ dir: join(root, dir), manifest: readJson(join(root, dir, "package.json")) }))
  .filter(({ manifest }) => manifest.private !== true)
  .filter(({ manifest }) => olderEffect === undefined || !("@effect/sql" in (manifest.peerDependencies ?? {})))
  .filter(({ manifest }) => olderEffect === undefined || ["@connector-store/core", "@connector-store/memory-adapter"].includes(manifest.name))

/** The files the `exports` of `manifest` name (each entry's `types` and `default`), without `./`. */
const exportedFiles = (manifest) =>
  Object.values(manifest.exports ?? {}).flatMap((entry) => typeof entry === "string" ? [entry] : Object.values(entry))
    .map((file) => file.replace(/^\.\//, ""))

/**
 * The files a package's `bin` runs: the CLI's bin imports its bundle (packages/cli/scripts/bundle.mjs, run on
 * prepack), whose child entry the simulation forks.
 */
const binFiles = (manifest) => manifest.bin === undefined ? [] : [...Object.values(manifest.bin).map((file) => file.replace(/^\.\//, "")),
  ...(manifest.name === "@connector-store/cli" ? ["dist/bundle/bin.js", "dist/bundle/child.js", "dist/bundle/LICENSES.txt"] : [])]

/** What a tarball must and must not ship: every file its `exports` name among the must. */
const checkContents = (name, files, manifest) => {
  for (const required of new Set(["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts", ...exportedFiles(manifest), ...binFiles(manifest)])) {
    if (!files.includes(required)) fail(`${name} does not ship ${required}`)
  }
  const unwanted = files.filter((file) => /tsbuildinfo|\.test\.|(^|\/)test\//.test(file))
  if (unwanted.length > 0) fail(`${name} ships ${unwanted.join(", ")}`)
}

/** Every source map and declaration map of an installed package points at files that were shipped. */
const checkMaps = (packageDir) => {
  const walk = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)])
  for (const map of walk(join(packageDir, "dist")).filter((file) => file.endsWith(".map"))) {
    for (const source of readJson(map).sources) {
      if (!existsSync(resolve(dirname(map), source))) fail(`${map} points at ${source}, which is not shipped`)
    }
  }
}

/** Every `npm install` line of the ```sh blocks of `document`, its words (a trailing `# comment` dropped). */
const installLinesOf = (document) => {
  const lines = []
  let inShell = false
  for (const line of readFileSync(join(root, document), "utf8").split("\n")) {
    if (/^```/.test(line)) inShell = !inShell && /^```sh\s*$/.test(line)
    else if (inShell && line.startsWith("npm install ")) {
      lines.push({ document, line, words: line.replace(/\s#.*$/, "").trim().split(/\s+/).slice(2) })
    }
  }
  return lines
}

/**
 * Runs `npm install <words>` in `cwd`, printing what npm said; fails on an
 * ERESOLVE error or warning (an "overriding peer" warning included): a user
 * copying the line must get a tree whose peers all agree.
 */
const npmInstall = (words, cwd, flags) => {
  const started = Date.now()
  const args = ["install", ...words, "--no-audit", "--no-fund", ...flags]
  const result = spawnSync("npm", args, { cwd, encoding: "utf8" })
  const said = `${result.stdout}${result.stderr}`
  console.log(`$ npm ${args.join(" ")}  (${((Date.now() - started) / 1000).toFixed(1)} s)`)
  if (said.trim() !== "") process.stdout.write(said.replace(/^/gm, "    "))
  if (result.status !== 0) fail(`npm install failed in ${cwd}`)
  if (/ERESOLVE|overriding peer/i.test(said)) fail(`npm install reported a peer conflict in ${cwd}`)
}

/** Each copy of effect in the lockfile of `app`: its path, its version. */
const effectsAt = (app) => {
  const lock = readJson(join(app, "package-lock.json"))
  return new Map(Object.entries(lock.packages).filter(([path]) => /(^|\/)node_modules\/effect$/.test(path)).map(([path, entry]) => [path, entry.version]))
}
/** The versions of effect in the lockfile of `app`. */
const effectsOf = (app) => new Set(effectsAt(app).values())

const pgProbe = async () => {
  const client = new pg.Client({ connectionString: pgAdminUrl, connectionTimeoutMillis: 3_000 })
  try {
    await client.connect()
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => undefined)
  }
}
const withAdmin = async (use) => {
  const client = new pg.Client({ connectionString: pgAdminUrl })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

/**
 * A copy of the workspace's packages (everything but their dist/ and node_modules/) in `stage`, with a
 * node_modules/ whose every entry is the workspace's own except @connector-store/*, which are the copies:
 * each package's prepack (which empties its dist/ and builds it again) runs there, so the workspace's own
 * dist/ stays as it is while this runs (CI runs it beside the tests and the soaks, which load that dist/).
 */
const stageWorkspace = (stage) => {
  mkdirSync(join(stage, "packages"), { recursive: true })
  for (const file of ["package.json", "tsconfig.base.json"]) cpSync(join(root, file), join(stage, file))
  for (const dir of rootPackage.workspaces) {
    cpSync(join(root, dir), join(stage, dir), {
      recursive: true,
      filter: (from) => !/(^|\/)(dist|node_modules)$|\.tsbuildinfo$/.test(from.slice(join(root, dir).length))
    })
  }
  const modules = join(stage, "node_modules")
  mkdirSync(join(modules, "@connector-store"), { recursive: true })
  for (const entry of readdirSync(join(root, "node_modules"))) {
    if (entry !== "@connector-store" && !entry.startsWith(".vite")) symlinkSync(join(root, "node_modules", entry), join(modules, entry))
  }
  for (const dir of rootPackage.workspaces) {
    const { name } = readJson(join(root, dir, "package.json"))
    symlinkSync(join("..", "..", dir), join(modules, name))
  }
}

const work = mkdtempSync(join(tmpdir(), "connector-store-packed-"))
const database = `cs_packed_${process.pid}`
let databaseCreated = false
packedInstall: try {
  const tarballs = join(work, "tarballs")
  mkdirSync(tarballs)
  const stage = join(work, "workspace")
  stageWorkspace(stage)
  const dependencies = {}
  for (const { dir, manifest } of published) {
    const staged = join(stage, dir.slice(root.length + 1))
    const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", tarballs], staged).replace(/^[^[]*/s, ""))
    checkContents(manifest.name, packed.files.map((file) => file.path), manifest)
    dependencies[manifest.name] = `file:${join(tarballs, packed.filename)}`
    for (const peer of Object.keys(manifest.peerDependencies ?? {})) {
      dependencies[peer] = peer === "effect" && olderEffect !== undefined ? olderEffect : pinned[peer]
      if (dependencies[peer] === undefined) fail(`${manifest.name}'s peer ${peer} is not pinned in the root devDependencies`)
    }
  }

  const documents = [
    ...published.map(({ dir }) => join(dir.slice(root.length + 1), "README.md")),
    "docs/testing-with-the-memory-adapter.md",
    "docs/testing-your-connector.md",
    "docs/observability.md",
    "README.md"
  ]
  // On an older effect (outside the lines' pins) the app gets the packages and their peers instead.
  const installLines = olderEffect === undefined ? documents.flatMap(installLinesOf) : []
  for (const { document, words } of installLines) {
    // A pinned word is the line the tests run on: `@effect/sql@0.52` for the root's 0.52.1.
    for (const word of words) {
      const [, name, version] = /^(@?[^@]+)@(.+)$/.exec(word) ?? []
      if (name === undefined || pinned[name] === undefined) continue
      if (pinned[name] !== version && !pinned[name].startsWith(`${version}.`)) fail(`${document} installs ${word}, the workspace tests ${name} ${pinned[name]}`)
    }
  }
  // The core comes with an adapter; its README's lines install the adapters.
  const isEffectWord = (word) => word === "effect" || word.startsWith("effect@") || word.startsWith("@effect/")
  for (const { manifest } of olderEffect === undefined ? published.filter(({ manifest }) => manifest.name !== "@connector-store/core") : []) {
    const own = installLines.filter(({ document, words }) => !document.startsWith("docs/") && words.includes(manifest.name))
    if (own.length === 0) fail(`no package README has an npm install line for ${manifest.name}`)
    for (const { document, words } of own) {
      if ("effect" in (manifest.dependencies ?? {})) {
        // A package with its own Effect: its line is the package alone, for an app on any Effect or on none.
        const extra = words.filter(isEffectWord)
        if (extra.length > 0) fail(`${document}'s install line of ${manifest.name} names ${extra.join(", ")}: the package brings its own`)
        continue
      }
      // An Effect-API line never names `effect`: npm would replace the app's own (4.x) with it. Without it npm
      // keeps the app's effect and refuses the line (ERESOLVE) in an app on another line, checked below.
      if (words.some((word) => word === "effect" || word.startsWith("effect@"))) {
        fail(`${document}'s install line of ${manifest.name} names effect: it would replace an app's own effect`)
      }
      // Each @effect/* peer is named with a version: left to npm, it would be the newest, made for effect 4.
      for (const peer of Object.keys(manifest.peerDependencies ?? {}).filter((name) => name.startsWith("@effect/"))) {
        if (!words.some((word) => word.startsWith(`${peer}@`))) fail(`${document}'s install line of ${manifest.name} does not pin its peer ${peer}`)
      }
    }
  }
  const internal = new Map(published.map(({ manifest }) => [manifest.name, manifest]))
  /** A line's words with each connector-store package replaced by its tarball, and the tarballs it depends on added. */
  const wordsOf = ({ words }) => {
    const needed = new Set()
    const add = (name) => {
      if (needed.has(name)) return
      needed.add(name)
      for (const dependency of Object.keys(internal.get(name).dependencies ?? {})) if (internal.has(dependency)) add(dependency)
    }
    for (const word of words) if (internal.has(word)) add(word)
    return [...words.filter((word) => !internal.has(word)), ...[...needed].map((name) => dependencies[name].slice("file:".length))]
  }

  /**
   * The `overrides` that make the connector-store packages a line's packages depend on (and that the
   * line does not name) their tarballs, as the registry would give them, without making them the app's
   * own dependencies.
   */
  const overridesFor = ({ words }) => {
    const needed = new Set()
    const add = (name) => {
      for (const dependency of Object.keys(internal.get(name).dependencies ?? {})) {
        if (internal.has(dependency) && !needed.has(dependency)) {
          needed.add(dependency)
          add(dependency)
        }
      }
    }
    for (const word of words) if (internal.has(word)) add(word)
    return Object.fromEntries([...needed].filter((name) => !words.includes(name)).map((name) => [name, dependencies[name]]))
  }
  const writeApp = (dir, extra = {}) => {
    mkdirSync(join(dir, "src"), { recursive: true })
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "connector-store-packed-app", private: true, type: "module", ...extra }, null, 2))
  }
  /**
   * The install lines with the same words counted once, each with the documents that carry it: two documents
   * giving a user the same line give the same tree, so a line is resolved and installed once.
   */
  const distinctLines = [...installLines.reduce((lines, line) => {
    const key = line.words.join(" ")
    lines.set(key, { ...line, documents: [...(lines.get(key)?.documents ?? []), line.document] })
    return lines
  }, new Map()).values()]
  if (olderEffect === undefined) {
    // Each line alone, in a fresh app, as a user copies it: the tree npm resolves (no download needed to resolve it).
    distinctLines.forEach((line, index) => {
      const dir = join(work, `line-${index}`)
      writeApp(dir)
      console.log(`\n${line.documents.join(", ")}: ${line.line}`)
      // Not --prefer-offline: the registry's newest versions as of now, which a stale cache would hide.
      npmInstall(wordsOf(line), dir, ["--package-lock-only"])
      const effects = effectsOf(dir)
      if (effects.size > 1 || [...effects].some((version) => !version.startsWith("3."))) {
        fail(`${line.documents.join(", ")}'s line resolves effect ${[...effects].join(", ")}: one copy of the 3.x line expected`)
      }
    })
  }

  if (linesOnly) {
    console.log(`packed install: every install line resolves (${installLines.length} lines, ${distinctLines.length} distinct)`)
    break packedInstall
  }

  const app = join(work, "app")
  writeApp(app, {
    // The native SQLite driver at the workspace's version, whose binary is copied below (13 crashes on Node 20).
    overrides: { "better-sqlite3": pinned["better-sqlite3"] },
    devDependencies: { typescript: pinned.typescript, "@types/node": pinned["@types/node"] }
  })
  const compilerOptions = {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    lib: ["ES2022"],
    types: ["node"],
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    verbatimModuleSyntax: true,
    skipLibCheck: false
  }
  const programs = olderEffect === undefined ? ["adapter.ts", "cycle.ts", "memory.ts", "sql.ts"] : ["adapter.ts", "cycle.ts", "memory.ts"]
  for (const file of programs) cpSync(join(root, "test/packaging/app", file), join(app, "src", file))
  /** Copies the any-app programs `files` into `dir`'s src. */
  const anyAppPrograms = (dir, files) => {
    for (const file of files) cpSync(join(root, "test/packaging/any-app", file), join(dir, "src", file))
  }
  if (olderEffect === undefined) anyAppPrograms(app, ["input.ts", "promise.ts"])
  const writeTsconfig = (dir, extra = {}) =>
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { ...compilerOptions, rootDir: "src", outDir: "dist", ...extra }, include: ["src"] }))
  writeTsconfig(app)

  const scripts = installScripts ? [] : ["--ignore-scripts"]
  if (olderEffect === undefined) {
    // An app on Effect 3 (the README: an app not on Effect yet installs effect@3.22 first), then every line,
    // one after the other: what a user who follows several of them ends up with.
    npmInstall([`effect@${pinned.effect}`], app, ["--prefer-offline", "--loglevel=warn", ...scripts])
    for (const line of distinctLines) npmInstall(wordsOf(line), app, ["--prefer-offline", "--loglevel=warn", ...scripts])
  } else {
    // Probing an effect outside the declared peer range is the point of --effect.
    npmInstall(Object.entries(dependencies).map(([name, spec]) => spec.startsWith("file:") ? spec.slice("file:".length) : `${name}@${spec}`), app,
      ["--prefer-offline", "--loglevel=error", "--legacy-peer-deps", ...scripts])
  }
  const native = "node_modules/better-sqlite3/build/Release/better_sqlite3.node"
  /** The workspace's SQLite binary in `dir` (same version, same Node), unless npm built it there. */
  const copyNative = (dir) => {
    if (installScripts || !existsSync(join(dir, "node_modules/better-sqlite3"))) return
    const version = (at) => readJson(join(at, "node_modules/better-sqlite3/package.json")).version
    if (version(dir) !== version(root)) fail(`better-sqlite3 ${version(dir)} in the app, ${version(root)} in the workspace`)
    mkdirSync(dirname(join(dir, native)), { recursive: true })
    cpSync(join(root, native), join(dir, native))
  }
  if (nativeStatus !== undefined) {
    // CI starts this while the workspace's install scripts (`npm rebuild`) build its SQLite binary.
    while (!existsSync(nativeStatus)) await new Promise((resolve) => setTimeout(resolve, 500))
    const status = readFileSync(nativeStatus, "utf8").trim()
    if (status !== "0") fail(`the workspace's install scripts ended with exit status ${status}`)
  }
  copyNative(app)
  /**
   * The Promise package where the Effect-API packages cannot go: an app on
   * Effect 4 (from the registry) and an app with no Effect. In the first,
   * every Effect-API line of the READMEs is refused (ERESOLVE) and changes
   * nothing; the Promise line installs beside the app's effect, which stays
   * what it was, and the store runs through it, rejections tagged. The
   * line's own connector-store package is its tarball; the ones it depends
   * on come in as overrides, the way the registry would hand them over.
   */
  const otherEffects = async (postgresUrl) => {
    const pgArgs = postgresUrl ? [postgresUrl] : []
    const flags = ["--prefer-offline", "--loglevel=warn", ...scripts]
    const readme = ({ document }) => !document.startsWith("docs/")
    const installs = (field) => ({ words }) => words.some((word) => internal.has(word) && "effect" in (internal.get(word)[field] ?? {}))
    const promiseLine = installLines.filter(readme).filter(installs("dependencies")).sort((a, b) => Number(b.document === "README.md") - Number(a.document === "README.md"))[0]
    if (promiseLine === undefined) fail("no README has an install line of a package that brings its own Effect")
    const effectLines = [...new Map(installLines.filter(readme).filter(installs("peerDependencies")).map((line) => [line.words.join(" "), line])).values()]
    const promiseWords = promiseLine.words.map((word) => internal.has(word) ? dependencies[word].slice("file:".length) : word)
    const devDependencies = { typescript: pinned.typescript, "@types/node": pinned["@types/node"] }
    const compileAndRun = (dir, label, files, extra) => {
      copyNative(dir)
      anyAppPrograms(dir, files)
      writeTsconfig(dir, extra)
      run(process.execPath, [join(dir, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], dir)
      process.stdout.write(run(process.execPath, ["dist/promise.js", label, join(dir, "app.sqlite"), ...pgArgs], dir))
    }

    const e4 = join(work, "effect4-app")
    writeApp(e4, { overrides: { "better-sqlite3": pinned["better-sqlite3"] }, devDependencies })
    npmInstall(["effect@4"], e4, flags)
    const effectOf = () => readJson(join(e4, "node_modules/effect/package.json")).version
    const appEffect = effectOf()
    if (!appEffect.startsWith("4.")) fail(`effect@4 installed effect ${appEffect}`)
    const manifestBefore = readFileSync(join(e4, "package.json"), "utf8")
    for (const line of effectLines) {
      console.log(`\n${line.document}, in an app on effect ${appEffect}: ${line.line}`)
      const args = ["install", ...wordsOf(line), "--no-audit", "--no-fund", ...flags]
      const started = Date.now()
      const result = spawnSync("npm", args, { cwd: e4, encoding: "utf8" })
      const said = `${result.stdout}${result.stderr}`
      console.log(`$ npm ${args.join(" ")}  (exit ${result.status}, ${((Date.now() - started) / 1000).toFixed(1)} s)`)
      process.stdout.write(said.split("\n").filter((text) => /ERESOLVE|Found: effect|peer effect/.test(text)).slice(0, 3).join("\n").replace(/^/gm, "    ") + "\n")
      if (result.status === 0 || !said.includes("ERESOLVE")) fail(`${line.document}'s line was not refused with ERESOLVE in an app on effect ${appEffect}:\n${said}`)
      if (readFileSync(join(e4, "package.json"), "utf8") !== manifestBefore) fail(`${line.document}'s refused line changed the app's package.json`)
      if (effectOf() !== appEffect) fail(`${line.document}'s refused line left effect ${effectOf()} in an app on ${appEffect}`)
    }
    const manifest = readJson(join(e4, "package.json"))
    writeFileSync(join(e4, "package.json"), JSON.stringify({ ...manifest, overrides: { ...manifest.overrides, ...overridesFor(promiseLine) } }, null, 2))
    console.log(`\n${promiseLine.document}, in an app on effect ${appEffect}: ${promiseLine.line}`)
    npmInstall(promiseWords, e4, flags)
    if (effectOf() !== appEffect) fail(`the Promise line replaced the app's effect ${appEffect} with ${effectOf()}`)
    if (readJson(join(e4, "package.json")).dependencies.effect !== manifest.dependencies.effect) fail("the Promise line changed the app's effect in package.json")
    const copies = effectsAt(e4)
    for (const [path, version] of copies) {
      if (path !== "node_modules/effect" && !(path.startsWith("node_modules/@connector-store/promise/node_modules/") && version.startsWith("3."))) {
        fail(`effect ${version} at ${path} in the app on effect ${appEffect}: only the Promise package's own 3.x copy expected beside it`)
      }
    }
    console.log(`the app's effect: ${appEffect}; beside it: ${[...copies].filter(([path]) => path !== "node_modules/effect").map(([path, version]) => `${version} at ${path}`).join(", ")}`)
    run("npm", ["ls", "--all"], e4) // exits non-zero on a peer left unmet or met by the wrong copy
    // Effect 4's own declarations name web types (CryptoKey, Storage): an app on it compiles with the DOM lib.
    compileAndRun(e4, "effect4_", ["input.ts", "promise.ts", "effect4.ts"], { lib: ["ES2022", "DOM"] })
    process.stdout.write(run(process.execPath, ["dist/effect4.js", join(e4, "effect4.sqlite"), ...pgArgs], e4))

    const plain = join(work, "plain-app")
    writeApp(plain, { overrides: { "better-sqlite3": pinned["better-sqlite3"], ...overridesFor(promiseLine) }, devDependencies })
    console.log(`\n${promiseLine.document}, in an app with no Effect: ${promiseLine.line}`)
    npmInstall(promiseWords, plain, flags)
    const own = Object.keys(readJson(join(plain, "package.json")).dependencies)
    if (own.join() !== "@connector-store/promise") fail(`the Promise line added ${own.join(", ")} to an app with no Effect`)
    run("npm", ["ls", "--all"], plain)
    // The shipped declarations were compiled whole (skipLibCheck off) in the apps above; here the app's own code.
    compileAndRun(plain, "plain_", ["input.ts", "promise.ts"], { skipLibCheck: true })
  }
  // npm ls exits non-zero when a copy is outside a declared range (the point of --effect); its listing is still right.
  let listing
  try {
    listing = run("npm", ["ls", "effect", "--all", "--parseable", "--long"], app)
  } catch (error) {
    if (olderEffect === undefined) throw error
    listing = error.stdout
  }
  const effects = new Set(listing.split("\n").filter(Boolean).map((line) => line.split(":")[1]))
  if (effects.size !== 1) fail(`the app has ${effects.size} copies of effect: ${[...effects].join(", ")}`)
  console.log(`one copy of effect: ${[...effects][0]}`)
  for (const { manifest } of published) checkMaps(join(app, "node_modules", manifest.name))

  const tsc = join(app, "node_modules/typescript/bin/tsc")
  run(process.execPath, [tsc, "-p", "tsconfig.json"], app)
  if (olderEffect !== undefined) {
    // The shipped sources, compiled against the older effect: an API the code uses that this effect lacks fails here.
    writeFileSync(join(app, "tsconfig.src.json"), JSON.stringify({
      compilerOptions: { ...compilerOptions, noEmit: true },
      include: published.map(({ manifest }) => `node_modules/${manifest.name}/src`),
      exclude: []
    }))
    run(process.execPath, [tsc, "-p", "tsconfig.src.json"], app)
  }

  process.stdout.write(run(process.execPath, ["dist/memory.js"], app))
  let postgresUrl
  if (olderEffect === undefined) {
    const sqliteFile = join(work, "app.sqlite")
    if (await pgProbe()) {
      await withAdmin((client) => client.query(`CREATE DATABASE ${database}`))
      databaseCreated = true
      const url = new URL(pgAdminUrl)
      url.pathname = `/${database}`
      postgresUrl = url.toString()
    } else if (pgRequired) {
      fail(`Postgres is required (CONNECTOR_STORE_REQUIRE_PG=1) but ${pgAdminUrl} did not answer`)
    } else {
      console.warn(`\n*** Postgres at ${pgAdminUrl} did not answer: the packed app runs on SQLite and memory only ***\n`)
    }
    const pgArgs = postgresUrl ? [postgresUrl] : []
    process.stdout.write(run(process.execPath, ["dist/sql.js", sqliteFile, ...pgArgs], app))
    process.stdout.write(run(process.execPath, ["dist/promise.js", "effect3_", join(work, "app-promise.sqlite"), ...pgArgs], app))
    if (published.some(({ manifest }) => manifest.name === "@connector-store/cli")) {
      // The installed bin: the CLI's peers resolve at run time, and the simulation forks its child process from the tarball.
      const simulated = run(join(app, "node_modules/.bin/connector-store"), ["simulate", "--operations", "6", "--runners", "2",
        "--processes", "1", "--seed", "1", "--json", "--database", join(work, "simulate.sqlite")], app)
      if (JSON.parse(simulated).ok !== true) fail(`connector-store simulate reported a failed invariant:\n${simulated}`)
      console.log("connector-store simulate: ok")
      // The packages README's line: npx finds the installed bin and never asks the registry.
      const help = run("npx", ["--no-install", "connector-store", "--help"], app, { ...process.env, NO_COLOR: "1" })
      if (!help.includes("connector-store")) fail(`npx --no-install connector-store --help printed:\n${help}`)
    }
  }
  if (olderEffect === undefined) await otherEffects(postgresUrl)
  console.log(`packed install ok: ${published.map(({ manifest }) => manifest.name).join(", ")}` +
    (olderEffect === undefined ? "" : ` on effect ${olderEffect}`))
} finally {
  rmSync(work, { recursive: true, force: true })
  if (databaseCreated) await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
}
