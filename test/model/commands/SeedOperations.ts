import { type ConnectorOperation, type DeferReason, OperationRepository, type OperationState } from "@connector-store/core"
import { Effect } from "effect"
import fc from "fast-check"
import { expectAgreement, expectOutcome, logCommand, outcomeOf } from "../agreement.js"
import type { RealStore } from "../RealStore.js"
import { CALLERS, CONNECTORS, DOCUMENTS, OPERATION_IDS, operationRow, OWNERS } from "../universe.js"
import { operationKeyOf, type WatchModel } from "../WatchModel.js"
import { at, ModelCommand, rel } from "./ModelCommand.js"

interface OperationSeed {
  readonly callerDID: string
  readonly operationID: string
  readonly ownerDID: string
  readonly connectorName: string
  readonly documentID: string | null
  readonly state: OperationState
  readonly attempts: number
  readonly nextOffset: number | null
  readonly deferReason: DeferReason | null
  readonly version: number
  readonly leased: boolean
  readonly leaseOffset: number | null
  readonly createdOffset: number
  readonly updatedOffset: number
}

const seedArb: fc.Arbitrary<OperationSeed> = fc.record({
  callerDID: fc.constantFrom(...CALLERS),
  operationID: fc.constantFrom(...OPERATION_IDS),
  ownerDID: fc.constantFrom(...OWNERS),
  connectorName: fc.constantFrom(...CONNECTORS),
  documentID: fc.constantFrom<string | null>(null, ...DOCUMENTS.slice(0, 2)),
  state: fc.constantFrom<OperationState>("committed", "committed", "dead", "dead", "attempted", "reconcile_only"),
  attempts: fc.integer({ min: 0, max: 3 }),
  nextOffset: fc.option(fc.integer({ min: -5, max: 10 }), { nil: null }),
  deferReason: fc.constantFrom<DeferReason | null>(null, null, "offline", "auth"),
  version: fc.integer({ min: 0, max: 2 }),
  leased: fc.constantFrom(false, false, true),
  leaseOffset: fc.option(fc.integer({ min: -5, max: 5 }), { nil: null, freq: 4 }),
  createdOffset: fc.integer({ min: -6, max: 0 }),
  updatedOffset: fc.integer({ min: -10, max: 0 })
})

const rowAt = (s: OperationSeed, now: number): ConnectorOperation =>
  operationRow({
      callerDID: s.callerDID,
      operationID: s.operationID,
      ownerDID: s.ownerDID,
      connectorName: s.connectorName,
      documentID: s.documentID,
      state: s.state,
      attempts: s.attempts,
      nextAttemptAt: s.nextOffset === null ? null : at(now, s.nextOffset),
      deferReason: s.deferReason,
      version: s.version,
      leaseToken: s.leased ? `lease:${s.callerDID}:${s.operationID}` : null,
      leaseExpiresAt: s.leaseOffset === null ? null : at(now, s.leaseOffset),
      createdAt: at(now, s.createdOffset),
    updatedAt: at(now, s.updatedOffset)
  })

const label = (s: OperationSeed): string => {
  const time = (offset: number | null) => offset === null ? null : rel(offset)
  return `${s.callerDID.slice(-1)}/${s.operationID} owner ${s.ownerDID.slice(-1)} ${s.connectorName} ` +
    `doc=${s.documentID} ${s.state} attempts=${s.attempts} next=${time(s.nextOffset)} defer=${s.deferReason} ` +
    `v=${s.version} lease=${s.leased ? "token" : "none"}/${time(s.leaseOffset)} created=${rel(s.createdOffset)} ` +
    `updated=${rel(s.updatedOffset)}`
}

/**
 * Puts a few operation rows in place through `OperationRepository.insert`, in
 * any state, on two documents (or none), with creation and update times close
 * together so partitions fill up and the newest-row order often falls to its
 * tie-breakers. A row is refused when its idempotency key is taken.
 */
export class SeedOperations extends ModelCommand {
  constructor(readonly seeds: ReadonlyArray<OperationSeed>) {
    super()
  }

  static readonly arbitrary = fc.array(seedArb, { minLength: 1, maxLength: 4 }).map((seeds) => new SeedOperations(seeds))

  async run(m: WatchModel, r: RealStore): Promise<void> {
    logCommand(m, String(this))
    for (const seed of this.seeds) {
      const row = rowAt(seed, m.now)
      const actual = outcomeOf(await r.run(Effect.flatMap(OperationRepository, (ops) => ops.insert(row))))
      const taken = m.operations.has(operationKeyOf(row))
      if (!taken) m.operations.set(operationKeyOf(row), row)
      expectOutcome(m, actual, { ok: !taken })
    }
    await expectAgreement(m, r)
  }

  toString(): string {
    return `seedOperations(${this.seeds.map(label).join("; ")})`
  }
}
