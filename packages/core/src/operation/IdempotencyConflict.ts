import { Data } from "effect"

/** A claim reused an idempotency key for a different payload; nothing was written. */
export class IdempotencyConflict extends Data.TaggedError("IdempotencyConflict")<{
  readonly callerDID: string
  readonly operationID: string
}> {
  override get message(): string {
    return `claimOperation: idempotency key ${this.callerDID}/${this.operationID} was already used for a different payload`
  }
}
