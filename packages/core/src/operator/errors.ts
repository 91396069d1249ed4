import { Data } from "effect"

/** An operator action named a row the store does not hold (`what` kind, `identity`); nothing was written. */
export class OperatorTargetNotFound extends Data.TaggedError("OperatorTargetNotFound")<{
  readonly method: string
  readonly what: "operation" | "watch" | "relist run" | "sync state"
  readonly identity: string
}> {
  override get message(): string {
    return `${this.method}: no ${this.what} ${this.identity}`
  }
}

/** An operator action was refused in the row's state (`reason` says why and what to do instead); nothing was written. */
export class OperatorActionRefused extends Data.TaggedError("OperatorActionRefused")<{
  readonly method: string
  readonly identity: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.method}: refused for ${this.identity}: ${this.reason}`
  }
}
