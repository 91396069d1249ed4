import { Context } from "effect"

/**
 * Where the store's random ids (node keys, incarnations, lease tokens, run ids) come from: random UUIDs by default;
 * synchronous, so a direct transition draws from it too.
 */
export class OperationEntropy extends Context.Reference<OperationEntropy>()("@connector-store/core/OperationEntropy", {
  defaultValue: (): { readonly token: () => string } => ({
    token: () => globalThis.crypto.randomUUID()
  })
}) {}
