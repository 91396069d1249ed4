import { type ConnectorOperation, ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, type Outcome, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { operationKeyOf, type WatchModel } from "../WatchModel.js"
import { ModelCommand, rel } from "./ModelCommand.js"

/** How `before` is put: near the clock (whole or not), or far beyond any stored time. */
type Cutoff = "whole" | "fraction" | "far future" | "far past"

/** Inputs the store must refuse before deleting anything. */
type BadInput = "before NaN" | "before Infinity" | "limit 0" | "limit 1.5" | "limit -1"

const isNewer = (a: ConnectorOperation, b: ConnectorOperation): boolean =>
  a.createdAt !== b.createdAt
    ? a.createdAt > b.createdAt
    : a.callerDID !== b.callerDID ? a.callerDID > b.callerDID : a.operationID > b.operationID

/**
 * The rows the keep rule protects: for every document, the newest committed
 * and the newest finished row of each caller and of each owner. (They decide
 * the document's derived write state.)
 */
const protectedRows = (rows: ReadonlyArray<ConnectorOperation>): ReadonlySet<ConnectorOperation> => {
  const newest = new Map<string, ConnectorOperation>()
  const offer = (partition: string, row: ConnectorOperation) => {
    const held = newest.get(partition)
    if (held === undefined || isNewer(row, held)) newest.set(partition, row)
  }
  for (const row of rows) {
    if (row.documentID === null || (row.state !== "committed" && row.state !== "dead")) continue
    for (const party of [`caller ${row.callerDID}`, `owner ${row.ownerDID}`]) {
      offer(`${row.documentID} ${party} finished`, row)
      if (row.state === "committed") offer(`${row.documentID} ${party} committed`, row)
    }
  }
  return new Set(newest.values())
}

/**
 * A retention pass: `collectFinishedOperations({ before, limit })`, with any
 * finite `before` (fractional, or far past every stored time), now and then
 * with an input it must refuse.
 *
 * The model: a row may go when it is committed or dead, last updated before
 * `before`, holds no lease that is still live at the store's clock (no token,
 * or an expiry already past), and is linked to no document or is not
 * protected. The oldest `limit` of those go, by (updatedAt, caller, id).
 */
export class CollectFinishedOperations extends ModelCommand {
  constructor(
    readonly beforeOffset: number,
    readonly cutoff: Cutoff,
    readonly limit: number,
    readonly bad: BadInput | null
  ) {
    super()
  }

  static readonly arbitrary = fc.tuple(
    fc.integer({ min: -4, max: 8 }),
    fc.constantFrom<Cutoff>("whole", "whole", "whole", "fraction", "far future", "far past"),
    fc.integer({ min: 1, max: 5 }),
    fc.oneof(
      { arbitrary: fc.constant(null), weight: 12 },
      { arbitrary: fc.constantFrom<BadInput>("before NaN", "before Infinity", "limit 0", "limit 1.5", "limit -1"), weight: 1 }
    )
  ).map(([before, cutoff, limit, bad]) => new CollectFinishedOperations(before, cutoff, limit, bad))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    const before = this.bad === "before NaN"
      ? Number.NaN
      : this.bad === "before Infinity"
      ? Number.POSITIVE_INFINITY
      : this.cutoff === "far future"
      ? 1e300
      : this.cutoff === "far past"
      ? -1e300
      : m.now + this.beforeOffset + (this.cutoff === "fraction" ? 0.5 : 0)
    const limit = this.bad === "limit 0" ? 0 : this.bad === "limit 1.5" ? 1.5 : this.bad === "limit -1" ? -1 : this.limit
    logCommand(m, `${this} [before=${before}, limit=${limit}]`)
    const actual = outcomeOf(await r.run(Effect.flatMap(ConnectorStore, (s) => s.collectFinishedOperations({ before, limit }))))

    const expected = ((): Outcome<number> => {
      if (this.bad !== null) return { fail: "InvalidInput" }
      const rows = [...m.operations.values()]
      const kept = protectedRows(rows)
      const leaseLive = (row: ConnectorOperation) =>
        row.leaseToken !== null && (row.leaseExpiresAt === null || row.leaseExpiresAt >= m.now)
      const doomed = rows
        .filter((row) =>
          (row.state === "committed" || row.state === "dead") && row.updatedAt < before && !leaseLive(row) &&
          (row.documentID === null || !kept.has(row))
        )
        .sort((a, b) =>
          a.updatedAt - b.updatedAt || (a.callerDID < b.callerDID ? -1 : a.callerDID > b.callerDID ? 1 : 0) ||
          (a.operationID < b.operationID ? -1 : 1)
        )
        .slice(0, limit)
      for (const row of doomed) m.operations.delete(operationKeyOf(row))
      return { ok: doomed.length }
    })()
    expectOutcome(m, actual, expected)
    await expectAgreement(m, r)
  }

  toString(): string {
    return this.bad !== null
      ? `collectFinishedOperations(${this.bad})`
      : `collectFinishedOperations(before=${this.cutoff.startsWith("far") ? this.cutoff : rel(this.beforeOffset)}` +
        `${this.cutoff === "fraction" ? "+0.5" : ""}, limit=${this.limit})`
  }
}
