import { Data } from "effect"

/**
 * `createPendingAuth` was given a `state` that a pending authorization
 * already uses. Nothing was written; the stored record is untouched.
 */
export class PendingAuthStateTaken extends Data.TaggedError("PendingAuthStateTaken")<{
  readonly state: string
}> {
  override get message(): string {
    return `createPendingAuth: a pending authorization with state ${JSON.stringify(this.state)} already exists`
  }
}
