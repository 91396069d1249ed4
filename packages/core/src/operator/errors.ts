import { Data } from "effect"

/**
 * An operator action named a row the store does not hold. Nothing was
 * written. `what` says which kind of row, `identity` which one.
 */
export class OperatorTargetNotFound extends Data.TaggedError("OperatorTargetNotFound")<{
  readonly method: string
  readonly what: "operation" | "watch" | "relist run" | "sync state"
  readonly identity: string
}> {
  override get message(): string {
    return `${this.method}: no ${this.what} ${this.identity}`
  }
}

/**
 * An operator action was refused because the row is not in a state it may
 * apply to (a settle of an operation whose outcome is known, a retry that
 * could send a request twice, …). Nothing was written. `reason` says why
 * and what to do instead.
 */
export class OperatorActionRefused extends Data.TaggedError("OperatorActionRefused")<{
  readonly method: string
  readonly identity: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.method}: refused for ${this.identity}: ${this.reason}`
  }
}
