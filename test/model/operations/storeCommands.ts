import { ConnectorStore } from "@connector-store/core"
import { Effect } from "effect"
import type fc from "fast-check"
import { expect } from "vitest"
import { expectAgreement, storedOperations } from "./agreement.js"
import type { ModelStore } from "./ModelStore.js"
import { DOCUMENTS, KeyProvider, keyLabel, type ModelOperation, type OperationModel, PARTY, touch } from "./OperationModel.js"

type Command = fc.AsyncCommand<OperationModel, ModelStore>

const call = <A, E>(real: ModelStore, use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) =>
  real.value(Effect.flatMap(ConnectorStore, use))

/** Time passes. */
export class Advance implements Command {
  constructor(readonly ms: number) {}
  check = () => true
  toString = () => `advance(${this.ms})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    model.now += this.ms
    real.now = model.now
  }
}

/** The runner of key `key` dies: the clock moves to the moment its lease lapses. */
export class Crash implements Command {
  constructor(readonly key: number) {}
  check = (model: Readonly<OperationModel>) => (model.operations.get(this.key)?.lease?.expiresAt ?? 0) > model.now
  toString = () => `crash(${keyLabel(this.key)})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    model.now = model.operations.get(this.key)!.lease!.expiresAt
    real.now = model.now
    return expectAgreement(model, real)
  }
}

const resumeIn = (model: OperationModel, reason: "offline" | "auth"): void => {
  for (const op of model.operations.values()) {
    if (op.state === "attempted" && op.deferReason === reason) {
      op.nextAttemptAt = model.now
      op.deferReason = null
      touch(model, op)
    }
  }
}

/** The device came back online. */
export class ResumeOffline implements Command {
  check = () => true
  toString = () => "resumeOfflineDeferred"
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    await call(real, (s) => s.resumeOfflineDeferred(model.now))
    resumeIn(model, "offline")
    return expectAgreement(model, real)
  }
}

/** An owner authorized some connectors again. */
export class ResumeAuth implements Command {
  constructor(readonly ownerDID: string, readonly connectorNames: ReadonlyArray<string>) {}
  check = () => true
  toString = () => `resumeAuthDeferred(${this.ownerDID}, [${this.connectorNames.join(", ")}])`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    await call(real, (s) => s.resumeAuthDeferred({ ownerDID: this.ownerDID, connectorNames: this.connectorNames, now: model.now }))
    if (this.ownerDID === PARTY.ownerDID && this.connectorNames.includes(PARTY.connectorName)) resumeIn(model, "auth")
    return expectAgreement(model, real)
  }
}

/** The boot/periodic sweep: due operations (crashed runners' included) and due watches. */
export class Sweep implements Command {
  check = () => true
  toString = () => "listDueOperations"
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const due = await call(real, (s) => s.listDueOperations(model.now))
    const expected = Array.from(model.operations.entries())
      .filter(([, op]) => op.state === "attempted" && (op.nextAttemptAt === null || op.nextAttemptAt <= model.now))
      .map(([key]) => keyLabel(key))
    expect(due.operations.map((op) => `${op.callerDID}/${op.operationID}`).sort()).toEqual(expected.sort())
    const dueWatches = Array.from(model.watches.entries()).filter(([, w]) => w.nextAttemptAt <= model.now).map(([source]) => source)
    expect(due.watches.map((w) => w.sourceID).sort()).toEqual(dueWatches.sort())
  }
}

const newer = (a: ModelOperation, b: ModelOperation): boolean =>
  a.createdAt !== b.createdAt ? a.createdAt > b.createdAt
  : a.callerDID !== b.callerDID ? a.callerDID > b.callerDID
  : a.operationID > b.operationID

/** Retention: checks what went against the keep rule's promises, then forgets it in the model. */
export class Retention implements Command {
  constructor(readonly beforeOffset: number, readonly limit: number) {}
  check = () => true
  toString = () => `collectFinishedOperations(before now${this.beforeOffset >= 0 ? "+" : ""}${this.beforeOffset}, limit ${this.limit})`
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const before = model.now + this.beforeOffset
    const count = await call(real, (s) => s.collectFinishedOperations({ before, limit: this.limit }))
    const remaining = new Set((await storedOperations(real)).map((op) => `${op.callerDID}/${op.operationID}`))
    const gone = Array.from(model.operations.entries()).filter(([key]) => !remaining.has(keyLabel(key)))
    expect(gone).toHaveLength(count)
    expect(count).toBeLessThanOrEqual(this.limit)
    const all = Array.from(model.operations.values())
    for (const [key, op] of gone) {
      expect(["committed", "dead"], keyLabel(key)).toContain(op.state)
      expect(op.updatedAt).toBeLessThan(before)
      // The newest finished row of its caller (all rows share one owner) for its document always stays.
      if (op.documentID !== null) {
        const newestOfCaller = all.filter((o) =>
          o.documentID === op.documentID && o.callerDID === op.callerDID && (o.state === "committed" || o.state === "dead")
        ).reduce((a, b) => newer(a, b) ? a : b)
        expect(newestOfCaller, `${keyLabel(key)} was its caller's newest finished row`).not.toBe(op)
      }
    }
    // A key retention forgot is a new operation when claimed again: a new provider life.
    for (const [key] of gone) {
      model.operations.delete(key)
      model.provider.set(key, new KeyProvider(key))
    }
    return expectAgreement(model, real)
  }
}

/** The derived write state of every document, against the model's own reading of the rule. */
export class WriteStates implements Command {
  check = () => true
  toString = () => "getDocumentWriteStates"
  async run(model: OperationModel, real: ModelStore): Promise<void> {
    const states = await call(real, (s) => s.getDocumentWriteStates(DOCUMENTS))
    for (const documentID of DOCUMENTS) {
      const entries = Array.from(model.operations.entries()).filter(([, op]) => op.documentID === documentID)
      const newestEnded = entries.filter(([, op]) => op.state !== "attempted").reduce<[number, ModelOperation] | undefined>(
        (a, b) => a === undefined || newer(b[1], a[1]) ? b : a, undefined)
      if (newestEnded !== undefined && newestEnded[1].state === "dead" && model.provider.get(newestEnded[0])!.possiblyLanded) {
        expect(states.get(documentID), `${documentID}: an operation that finished in doubt never reads failed`).not.toBe("failed")
      }
      const ops = entries.map(([, op]) => op)
      const ended = ops.filter((op) => op.state !== "attempted")
      const newest = ended.length === 0 ? undefined : ended.reduce((a, b) => newer(a, b) ? a : b)
      const expected = ops.some((op) => op.state === "attempted") ? "pending"
        : newest === undefined ? "none"
        : newest.state === "committed" ? "committed"
        : newest.state === "dead" ? (newest.inDoubtSince !== null || newest.sendMarker !== null ? "unconfirmed" : "failed")
        : "unconfirmed"
      expect(states.get(documentID), documentID).toBe(expected)
    }
  }
}


