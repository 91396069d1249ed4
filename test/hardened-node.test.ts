import { describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"
import { runProcess } from "./support/processes.js"

// Spawns the built packages: `npm run build` first.

/** Node refusing `eval` and `new Function`, as a hardened deployment (or a content security policy) does. */
const HARDENED = ["--disallow-code-generation-from-strings"]

const databases: ReadonlyArray<{ readonly name: string; readonly fresh: () => Promise<readonly [string, string]> }> = [
  { name: "sqlite", fresh: async () => [freshSqlitePath(), "t_"] },
  ...(pgAvailable ? [{ name: "postgres", fresh: async () => [await pgDatabaseForFile(), freshPrefix()] as const }] : [])
]

describe.each(databases)("on $name, in a Node that refuses code generation from strings", ({ fresh }) => {
  it("the store opens, commits a write-back and reads its rows back whole", async () => {
    const [url, prefix] = await fresh()
    const printed = JSON.parse(await runProcess("lifecycle", [url, prefix], HARDENED))
    expect(printed).toEqual({
      claim: "claimed",
      finalize: "committed",
      operation: { state: "committed", sourceID: "src-1", resultEntity: { id: "src-1" } },
      claimed: [{ sourceID: "src-1", documentID: "doc-1", status: "pending_verification" }]
    })
  }, 60_000)
})
