/** The store contract on the MemoryStore. */
import { MemoryStore } from '../../src/store/memory-store.js';
import { describeStoreContract } from '../helpers/store-contract.js';

describeStoreContract({ name: 'MemoryStore', open: () => Promise.resolve(new MemoryStore()) });
