import { PersistenceError, type PersistenceReason } from "@connector-store/core"
import { describe, expect, it } from "vitest"
import { failureLine } from "../packages/cli/src/store.js"

const URL = "postgres://ops:hunter22x@db/store?password=hunter22x"

const failure = (reason: PersistenceReason, driverMessage = "the driver said so") =>
  new PersistenceError({ operation: "operation.lockRead", method: "settleOperation", reason, driverMessage, cause: new Error(driverMessage) })

describe("a storage failure's line says what to do", () => {
  it("for each reason that needs a person", () => {
    const advice: ReadonlyArray<readonly [PersistenceReason, RegExp]> = [
      ["timeout", /nothing of it was kept: .*pg_stat_activity.*--timeout/],
      ["lock-timeout", /another session held a lock it needed.*run the command again/],
      ["too-many-connections", /no free connection slot: close idle clients or raise the server's max_connections/],
      ["corrupt", /the database file is damaged: stop every process that uses it, keep a copy, and restore it from a backup/],
      ["database-replaced", /deleted or replaced while the store had it open.*find what removed it/]
    ]
    for (const [reason, words] of advice) {
      const line = failureLine(URL, failure(reason))
      expect(line, reason).toMatch(new RegExp(`^settleOperation: ${reason}: the driver said so \\(operation\\.lockRead\\); `))
      expect(line, reason).toMatch(words)
    }
  })

  it("adds nothing to a failure the driver's words explain, and never repeats the URL's password", () => {
    expect(failureLine(URL, failure("constraint"))).toBe("settleOperation: constraint: the driver said so (operation.lockRead)")
    const line = failureLine(URL, failure("unknown", `could not use ${URL}: bad password hunter22x`))
    expect(line).not.toContain("hunter22x")
    expect(line).toContain("postgres://ops:***@db/store?password=***")
  })
})
