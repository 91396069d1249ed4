import { Context, Effect } from "effect"

/**
 * Where operation tokens come from: node keys, incarnations and lease
 * tokens. Each must be unique and unguessable; the default draws random
 * UUIDs from the platform's cryptographic generator. Tests may provide a
 * deterministic source.
 */
export class OperationEntropy extends Context.Reference<OperationEntropy>()("@connector-store/core/OperationEntropy", {
  defaultValue: (): { readonly token: Effect.Effect<string> } => ({
    token: Effect.sync(() => globalThis.crypto.randomUUID())
  })
}) {}
