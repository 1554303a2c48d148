// Internal to the KV-event decoder (collectors/kv_event_decoder.cc, kv_event_fields.cc);
// not a public API. The events of a batch in each engine's shape: vLLM's and SGLang's
// positional and map forms, TensorRT-LLM's native and wrapped ones (kv_event_fields.cc).
// The envelope around them is read in kv_event_decoder.cc.
//
// Thread safety: pure functions.
#ifndef KVWATCH_COLLECTORS_KV_EVENT_FIELDS_H_
#define KVWATCH_COLLECTORS_KV_EVENT_FIELDS_H_

#include "collectors/kv_event_decoder.h"
#include "collectors/msgpack_object.h"

namespace kvwatch::collectors::decoder_internal {

// Decodes the envelope's events array into batch->events, reusing the storage of
// the events already there; an error names the event, its form and the field.
KvDecodeStatus DecodeEvents(const Object& events, KvEventBatch* batch);

}  // namespace kvwatch::collectors::decoder_internal

#endif  // KVWATCH_COLLECTORS_KV_EVENT_FIELDS_H_
