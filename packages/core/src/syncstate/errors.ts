import { Data } from "effect"

/** `updateSyncProgress` lost its compare-and-set on every attempt (`maxRetries + 1`); nothing was written. */
export class SyncProgressExhausted extends Data.TaggedError("SyncProgressExhausted")<{
  readonly connectorName: string
  readonly ownerDID: string
  readonly attempts: number
}> {
  override get message(): string {
    return `updateSyncProgress: lost the compare-and-set ${this.attempts} times for connector ${this.connectorName}, owner ${this.ownerDID}`
  }
}

/** The caller's recompute threw. Nothing was written. */
export class SyncProgressRecomputeFailed extends Data.TaggedError("SyncProgressRecomputeFailed")<{
  readonly connectorName: string
  readonly ownerDID: string
  readonly cause: unknown
}> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `updateSyncProgress: the recompute for connector ${this.connectorName}, owner ${this.ownerDID} threw: ${cause}`
  }
}

/** A write fenced by the sync lease found it no longer the caller's; nothing was written: stop and claim again. */
export class SyncLeaseLost extends Data.TaggedError("SyncLeaseLost")<{
  readonly method: string
  readonly connectorName: string
  readonly ownerDID: string
}> {
  override get message(): string {
    return `${this.method}: the sync lease of connector ${this.connectorName}, owner ${this.ownerDID} is no longer the caller's (taken over, released, or its row deleted); nothing was written`
  }
}
