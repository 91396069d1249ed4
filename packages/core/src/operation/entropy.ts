import { Context } from "effect"

/**
 * Where the store's random ids come from: operations' node keys,
 * incarnations and lease tokens, sync-state incarnations and lease tokens,
 * and relist run ids. Each must be unique and unguessable; the default draws random
 * UUIDs from the platform's cryptographic generator. Tests may provide a
 * deterministic source. `token` is synchronous, so a transition that runs
 * outside a fiber (see `DirectDatabase`) draws from the same source.
 */
export class OperationEntropy extends Context.Reference<OperationEntropy>()("@connector-store/core/OperationEntropy", {
  defaultValue: (): { readonly token: () => string } => ({
    token: () => globalThis.crypto.randomUUID()
  })
}) {}
