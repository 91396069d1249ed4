import type { FakeProvider, WriteRequest } from "@connector-store/testkit/provider"

/** The typed surface of provider.mjs the tests use. */
export declare const REQUEST_TIMEOUT_MS: number
export declare const isInvalidPayload: (key: string) => boolean
export declare const modelRequestOf: (body: Record<string, unknown>) => WriteRequest
export interface SoakProvider {
  readonly url: string
  readonly model: FakeProvider
  readonly faults: Readonly<Record<string, number>>
  calm(): void
  close(): Promise<void>
}
export declare const startProvider: (options: { readonly seed: number; readonly ledgerPath: string }) => Promise<SoakProvider>
