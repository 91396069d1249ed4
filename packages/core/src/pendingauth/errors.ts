import { Data } from "effect"

/** `createPendingAuth` was given a `state` already in use; nothing was written. */
export class PendingAuthStateTaken extends Data.TaggedError("PendingAuthStateTaken")<{
  readonly state: string
}> {
  override get message(): string {
    return `createPendingAuth: a pending authorization with state ${JSON.stringify(this.state)} already exists`
  }
}
