/**
 * In-memory adapter of connector-store's repository port, for unit tests.
 *
 * @module @connector-store/memory-adapter
 */
export * from "./MemoryDatabase.js"
export * from "./MemoryWatchRepository.js"
export * from "./MemoryOperationRepository.js"
export * from "./MemoryRelistRepository.js"
export * from "./MemorySyncStateRepository.js"
export * from "./MemoryPendingAuthRepository.js"
export * from "./MemoryStore.js"
export * from "./MemoryOperatorRepository.js"
export * from "./MemoryDirect.js"
export * from "./MemoryProviderLimitRepository.js"
