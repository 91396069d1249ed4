import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { describe, expect, it } from "vitest"
import { checkAdapterEntry } from "./app/adapter.js"

// The core's entries as the built packages resolve them (`npm run build`
// first): the workspace's node_modules links each package, so Node reads the
// `exports` of its package.json and loads dist/.

const root = fileURLToPath(new URL("../..", import.meta.url))
const core = join(root, "packages/core")
const manifest = JSON.parse(readFileSync(join(core, "package.json"), "utf8")) as {
  exports: Record<string, string | Record<string, string>>
}

/** The names each entry of the built core exports at run time, read by a Node of its own. */
const namesOf = (...specifiers: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> =>
  JSON.parse(execFileSync(process.execPath, [
    "--input-type=module",
    "-e",
    `console.log(JSON.stringify(await Promise.all(${JSON.stringify(specifiers)}.map(async (s) => Object.keys(await import(s))))))`
  ], { cwd: root, encoding: "utf8" }))

const ADAPTER_ONLY = ["LostRace", "countLostRaceNow", "retryOnLostRace", "MAX_CAS_ATTEMPTS", "TurnQueue", "DirectDatabase", "LaneDatabase", "makePromiseStore", "nativeTracer", "openOptionsProblem"]

describe("the core's package entries", () => {
  it("point at built files, types and code alike", () => {
    expect(Object.keys(manifest.exports)).toEqual([".", "./adapter", "./package.json"])
    for (const [entry, target] of Object.entries(manifest.exports)) {
      for (const file of typeof target === "string" ? [target] : Object.values(target)) {
        expect(existsSync(join(core, file)), `${entry} → ${file}`).toBe(true)
      }
    }
  })

  it("keep the adapter's names out of the main entry, each name in one entry", () => {
    const [main = [], adapter = []] = namesOf("@connector-store/core", "@connector-store/core/adapter")
    expect(adapter).toEqual(expect.arrayContaining(ADAPTER_ONLY))
    expect(main.filter((name) => adapter.includes(name))).toEqual([])
    expect(main).toEqual(expect.arrayContaining(["ConnectorStore", "InvalidInput", "PersistenceError", "WatchRepository", "StoreSnapshot", "clockFrom"]))
  })

  it("are what the built adapters import", () => {
    for (const file of ["packages/memory-adapter/dist/MemoryStore.js", "packages/sql-adapter/dist/SqlStore.js"]) {
      expect(readFileSync(join(root, file), "utf8")).toContain(`from "@connector-store/core/adapter"`)
    }
    expect(namesOf("@connector-store/sql-adapter", "@connector-store/memory-adapter")).toHaveLength(2)
  })

  it("include the testkit, whose built entry imports the adapter entry and the memory adapter", () => {
    const [testkit = []] = namesOf("@connector-store/testkit")
    expect(testkit).toEqual(expect.arrayContaining(["checkRunnerLoop", "FakeProvider", "openFaultyMemoryStore", "faultyMemoryLayer", "claimInput"]))
    const faults = readFileSync(join(root, "packages/testkit/dist/faults.js"), "utf8")
    expect(faults).toContain(`from "@connector-store/core/adapter"`)
    expect(faults).toContain(`from "@connector-store/memory-adapter"`)
  })

  it("give the testkit's provider model an entry of its own that loads neither fast-check nor the memory store (the simulation imports it)", () => {
    // Every import the entry makes goes through this hook, which refuses the heavy ones.
    const hook = `export async function resolve(s, c, next) {
      if (s === "fast-check" || s === "effect" || s.startsWith("@connector-store/memory-adapter")) throw new Error("the entry loads " + s)
      return next(s, c)
    }`
    const names = JSON.parse(execFileSync(process.execPath, [
      "--input-type=module",
      "-e",
      `import { register } from "node:module"
      register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hook)}))
      console.log(JSON.stringify(Object.keys(await import("@connector-store/testkit/provider"))))`
    ], { cwd: root, encoding: "utf8" })) as ReadonlyArray<string>
    expect(names).toEqual(expect.arrayContaining(["FakeProvider", "providerWithLedger", "ProviderError", "keyOf", "REQUEST_FATES"]))
    expect(names).not.toContain("checkRunnerLoop")
    expect(readFileSync(join(root, "packages/simulation/dist/provider.js"), "utf8")).toContain(`from "@connector-store/testkit/provider"`)
  })

  it("share one copy of each module: the memory store's direct lane is under the adapter entry's tag", async () => {
    const store = openMemoryConnectorStore({ readWinner: async () => null })
    try {
      await checkAdapterEntry(store)
    } finally {
      await store.close()
    }
  })
})
