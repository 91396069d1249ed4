import { Data } from "effect"

/**
 * A claim reused an idempotency key `(callerDID, operationID)` for a
 * different payload (its payload hash differs from the stored one). Nothing
 * was written; the stored operation is untouched.
 */
export class IdempotencyConflict extends Data.TaggedError("IdempotencyConflict")<{
  readonly callerDID: string
  readonly operationID: string
}> {
  override get message(): string {
    return `claimOperation: idempotency key ${this.callerDID}/${this.operationID} was already used for a different payload`
  }
}
