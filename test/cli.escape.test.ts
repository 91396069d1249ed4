import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { printable, renderFields, renderTable, terminalSafe } from "../packages/cli/src/table.js"
import { type CliRun, jsonOf, runCli } from "./support/cli/run.js"
import { type CliDatabase, dbArgs } from "./support/cli/seed.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The CLI tests spawn the built CLI: `npm run build` first.

/** Any character that would act on a terminal instead of showing: C0 but the line break, DEL, C1, bidi controls. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

/** Ids that clear the screen, return the cursor, start a forged line, reverse what follows, or are C1 and DEL. */
const OPERATION = {
  callerDID: "did:caller:\u001b[2J",
  operationID: "op\rFORGED",
  ownerDID: "did:owner:\nconnector-store: all clear",
  connectorName: "gcal\u202eevil",
  documentID: "doc\u009b31m\u007f"
}
const WATCH = {
  ownerDID: OPERATION.ownerDID,
  connectorName: OPERATION.connectorName,
  model: "Event\u001b]0;title\u0007",
  accountKey: "acct\r\n",
  sourceID: "src\u2066\u202e"
}

/** One committed operation on those ids, its watch pending and due since the epoch (so `status` names it oldest). */
const seedHostile = async (db: CliDatabase) => {
  const store = await openConnectorStore({ ...db, maxConnections: 2, readWinner: async (documentID) => `winner-of-${documentID}` })
  try {
    const key = { callerDID: OPERATION.callerDID, operationID: OPERATION.operationID }
    const claimed = await store.claimOperation({
      ...key,
      ownerDID: OPERATION.ownerDID,
      connectorName: OPERATION.connectorName,
      model: WATCH.model,
      op: "update",
      accountKey: WATCH.accountKey,
      target: "calendar/\u001b[31mprimary",
      sourceID: WATCH.sourceID,
      deterministicEventID: "event-1",
      payloadHash: "hash-1",
      reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
      documentID: OPERATION.documentID
    })
    if (claimed.outcome !== "claimed") throw new Error(`seed claim was ${claimed.outcome}`)
    const leaseToken = claimed.lease.token
    await store.markOperationSent(key, { leaseToken })
    await store.finalizeOperationAndArmWatch(key, {
      leaseToken,
      sourceID: WATCH.sourceID,
      documentID: OPERATION.documentID,
      providerEtag: "etag-\u001b[1m",
      resultEntity: { id: "\u202e" },
      watchDueAt: 0
    })
  } finally {
    await store.close()
  }
}

/** Asserts that `run` wrote no raw control or bidi character, on stdout or stderr. */
const expectNoRawControl = (run: CliRun, what: string) => {
  expect(RAW_CONTROL.exec(run.stdout), `${what}: stdout ${JSON.stringify(run.stdout)}`).toBeNull()
  expect(RAW_CONTROL.exec(run.stderr), `${what}: stderr ${JSON.stringify(run.stderr)}`).toBeNull()
}

const lines = (text: string) => text.split("\n").filter((line) => line.length > 0)

describe("cells and lines show control characters as escapes", () => {
  it("printable writes each control, bidi and separator character visibly, and nothing else", () => {
    expect(printable("a\u001b[2Jb\rc\nd\te\u007ff\u009bg\u202eh\u2066i\u2028j")).toBe(
      "a\\x1b[2Jb\\rc\\nd\\te\\x7ff\\x9bg\\u202eh\\u2066i\\u2028j"
    )
    expect(printable("did:owner:1/gcal — ünïcödé 日本")).toBe("did:owner:1/gcal — ünïcödé 日本")
  })

  it("terminalSafe keeps line breaks and keeps JSON the same JSON", () => {
    const value = { id: "\u001b[2J\r\u007f\u009b\u202e\u2066\u2028", plain: "a\nb" }
    const printed = terminalSafe(JSON.stringify(value, null, 2))
    expect(RAW_CONTROL.exec(printed)).toBeNull()
    expect(JSON.parse(printed)).toEqual(value)
    expect(terminalSafe("one\ntwo")).toBe("one\ntwo")
  })

  it("a table and a field list stay one line per row, aligned on the escaped text", () => {
    const table = renderTable(["ID", "STATE"], [["a\nb", "x"], ["\u202elong", "y"]])
    expect(table.split("\n")).toEqual(["ID          STATE", "a\\nb        x", "\\u202elong  y"])
    expect(renderFields([["caller", "did:\r\n"]])).toBe("caller: did:\\r\\n")
  })
})

const databases: ReadonlyArray<{ readonly name: string; readonly fresh: () => Promise<CliDatabase> }> = [
  { name: "sqlite", fresh: async () => ({ url: freshSqlitePath() }) },
  ...(pgAvailable ? [{ name: "postgres", fresh: async () => ({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix() }) }] : [])
]

for (const { name, fresh } of databases) {
  // One test per database, each on its own database: the databases' suites run beside each other.
  describe(`the CLI prints hostile ids escaped, on ${name}`, { timeout: 600_000, concurrent: true }, () => {
    it("operations, watches, show, status and a failure line hold no raw control byte; --json gives the ids back exactly", async () => {
      const db = await fresh()
      await seedHostile(db)
      const cli = (...args: ReadonlyArray<string>) => runCli([...args, ...dbArgs(db)])
      const operationKey = ["--caller", OPERATION.callerDID, "--operation", OPERATION.operationID]
      const watchIdentity = [
        "--owner", WATCH.ownerDID, "--connector", WATCH.connectorName, "--model", WATCH.model,
        "--account", WATCH.accountKey, "--source", WATCH.sourceID
      ]
      const [operations, watches, showOperation, showWatch, status, missing] = await Promise.all([
        cli("operations"),
        cli("watches"),
        cli("show", "operation", ...operationKey),
        cli("show", "watch", ...watchIdentity),
        cli("status"),
        cli("show", "operation", "--caller", OPERATION.callerDID, "--operation", "nope\n\u202e")
      ])
      const runs = { operations, watches, showOperation, showWatch, status, missing }
      for (const [what, run] of Object.entries(runs)) expectNoRawControl(run, what)

      expect(operations.code).toBe(0)
      // The header and the one row: no id started a line of its own.
      expect(lines(operations.stdout)).toHaveLength(2)
      expect(operations.stdout).toContain("did:caller:\\x1b[2J")
      expect(operations.stdout).toContain("op\\rFORGED")
      expect(operations.stdout).toContain("did:owner:\\nconnector-store: all clear")
      expect(operations.stdout).toContain("gcal\\u202eevil")
      expect(operations.stdout).toContain("doc\\x9b31m\\x7f")

      expect(watches.code).toBe(0)
      expect(lines(watches.stdout)).toHaveLength(2)
      expect(watches.stdout).toContain("Event\\x1b]0;title\\x07")
      expect(watches.stdout).toContain("src\\u2066\\u202e")

      expect(showOperation.code).toBe(0)
      expect(showOperation.stdout).toMatch(/^target:\s+calendar\/\\x1b\[31mprimary$/m)
      expect(showOperation.stdout).toMatch(/^provider etag:\s+etag-\\x1b\[1m$/m)
      expect(showWatch.code).toBe(0)
      expect(showWatch.stdout).toMatch(/^account:\s+acct\\r\\n$/m)

      expect(status.code).toBe(0)
      expect(status.stdout).toMatch(/^oldest due watch:\s+did:owner:\\nconnector-store: all clear\/gcal\\u202eevil\/Event\\x1b\]0;title\\x07\/acct\\r\\n\/src\\u2066\\u202e, due /m)

      expect(missing.code).toBe(1)
      expect(lines(missing.stderr)).toEqual(["connector-store: no operation did:caller:\\x1b[2J/nope\\n\\u202e"])

      const json = jsonOf<{ operations: Array<Record<string, unknown>> }>(await cli("operations", "--json"))
      expect(json.operations[0]).toMatchObject(OPERATION)
      const watchJson = await cli("watches", "--json")
      expectNoRawControl(watchJson, "watches --json")
      expect(jsonOf<{ watches: Array<Record<string, unknown>> }>(watchJson).watches[0]).toMatchObject(WATCH)
      const shown = await cli("show", "operation", "--json", ...operationKey)
      expectNoRawControl(shown, "show operation --json")
      expect(jsonOf(shown)).toMatchObject({ ...OPERATION, providerEtag: "etag-\u001b[1m", resultEntity: { id: "\u202e" } })
    })
  })
}
