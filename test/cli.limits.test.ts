import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { failureOf, jsonOf, runCliHere } from "./support/cli/run.js"
import { type CliDatabase, dbArgs } from "./support/cli/seed.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The commands run in this process (`runCliHere`).

const databases: ReadonlyArray<{ readonly name: string; readonly fresh: () => Promise<CliDatabase> }> = [
  { name: "sqlite", fresh: async () => ({ url: freshSqlitePath() }) },
  ...(pgAvailable
    ? [{ name: "postgres", fresh: async () => ({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix() }) }]
    : [])
]

const ACCOUNT_1 = ["--connector", "gcal", "--account", "acct-1"] as const

describe.each(databases)("connector-store limits on $name", { timeout: 600_000 }, ({ fresh }) => {
  it("sets a cap, pauses and resumes an account: every store that enforces limits follows at once", async () => {
    const db = await fresh()
    const cli = (...args: ReadonlyArray<string>) => runCliHere([...args, ...dbArgs(db)])
    expect((await cli("migrate")).code).toBe(0)
    expect((await cli("limits", "list")).stdout).toBe("no provider limits are set\n")
    const store = await openConnectorStore({ ...db, maxConnections: 2, providerLimits: true, readWinner: () => null })
    try {
      const capped = jsonOf(await cli("limits", "set", ...ACCOUNT_1, "--max-in-flight", "2", "--json"))
      expect(capped).toMatchObject({ scope: { connectorName: "gcal", accountKey: "acct-1" }, maxInFlight: 2, pausedUntil: null })
      expect((await cli("limits", "set", "--connector", "gcal", "--max-in-flight", "5")).stdout).toBe("set gcal: at most 5 in flight, not paused\n")

      const paused = await cli("limits", "pause", ...ACCOUNT_1, "--until", "10m")
      expect(paused.code).toBe(0)
      expect(paused.stdout).toMatch(/^gcal\/acct-1: at most 2 in flight, paused until \d{4}-\d\d-\d\dT[\d:.]+Z \(in (9|10)m\)\n$/)
      const held = await store.claimOperation(claimInput({ operationID: "op-a1", accountKey: "acct-1" }))
      expect(held).toMatchObject({ outcome: "scheduled", limitedBy: { scope: { connectorName: "gcal", accountKey: "acct-1" }, reason: "paused" } })
      expect((await store.claimOperation(claimInput({ operationID: "op-a2", accountKey: "acct-2", sourceID: "src-2" }))).outcome).toBe("claimed")

      const table = (await cli("limits", "list")).stdout.trim().split("\n")
      expect(table[0]).toMatch(/^CONNECTOR\s+ACCOUNT\s+MAX IN FLIGHT\s+PAUSED UNTIL\s+STATUS\s+VERSION$/)
      expect(table[1]).toMatch(/^gcal\s+\(all accounts\)\s+5\s+-\s+-\s+0$/)
      expect(table[2]).toMatch(/^gcal\s+acct-1\s+2\s+in (9|10)m\s+-\s+1$/)

      expect((await cli("limits", "resume", ...ACCOUNT_1)).stdout).toBe("resumed gcal/acct-1: at most 2 in flight, not paused\n")
      expect((await store.claimOperation(claimInput({ operationID: "op-a3", accountKey: "acct-1", sourceID: "src-3" }))).outcome).toBe("claimed")
      expect(jsonOf(await cli("limits", "list", "--json")).limits).toEqual([
        expect.objectContaining({ scope: { connectorName: "gcal" }, maxInFlight: 5 }),
        expect.objectContaining({ scope: { connectorName: "gcal", accountKey: "acct-1" }, maxInFlight: 2, pausedUntil: null })
      ])
      const cleared = jsonOf(await cli("limits", "set", ...ACCOUNT_1, "--max-in-flight", "none", "--json"))
      expect(cleared).toMatchObject({ maxInFlight: null })
      expect((await cli("limits", "resume", "--connector", "jira")).stdout).toBe("jira has no limits; nothing changed\n")
    } finally {
      await store.close()
    }
  })

  it("bad arguments: one clear line and a non-zero exit, nothing written", async () => {
    const db = await fresh()
    const cli = (...args: ReadonlyArray<string>) => runCliHere([...args, ...dbArgs(db)])
    expect((await cli("migrate")).code).toBe(0)
    expect((await cli("limits", "set", ...ACCOUNT_1, "--max-in-flight", "3")).code).toBe(0)
    const before = jsonOf(await cli("limits", "list", "--json"))
    for (const [args, expected] of [
      [["limits", "set", ...ACCOUNT_1, "--max-in-flight", "two"], /^connector-store: --max-in-flight must be a whole number or "none"; got "two"$/],
      [["limits", "set", ...ACCOUNT_1, "--max-in-flight", "0"], /^connector-store: setProviderLimit: limit\.maxInFlight /],
      [["limits", "set", "--connector", "", "--max-in-flight", "1"], /^connector-store: setProviderLimit: limit\.connectorName /],
      [["limits", "pause", ...ACCOUNT_1, "--until", "soon"], /^connector-store: --until must be a duration like 10m or 2h, or an ISO time in the future; got "soon"$/],
      [["limits", "pause", ...ACCOUNT_1, "--until", "2020-01-01"], /^connector-store: --until must be .* in the future; got "2020-01-01"$/],
      [["limits", "pause", "--account", "acct-1", "--until", "10m"], /--connector/]
    ] as const) {
      const failed = failureOf(await cli(...args))
      expect(failed.code, args.join(" ")).toBe(1)
      expect(failed.lines, args.join(" ")).toHaveLength(1)
      expect(failed.lines[0], args.join(" ")).toMatch(expected)
    }
    expect(jsonOf(await cli("limits", "list", "--json"))).toEqual(before)
  })
})
