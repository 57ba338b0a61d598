"""Names vulture (dead-code finder) cannot see used: registered components (found by name from configs), nn.Module
hooks called by torch, public API and counters that tests and users read, dataclass fields read through asdict,
expat handler attributes. Regenerate the list with `vulture elmo_features tasks --min-confidence 60 --make-whitelist`,
and add a name here only with a reason in the commit. tests/test_dead_code.py runs the check."""
AverageMixer
CharLSTM
ConcatFeatures
ConcatProject
CrfTagger
ElmoFeatures
ElmoHub
GatedFusion
InputError
LayerAttention
OUTPUTS
SentenceClassifier
StaticFeatures
TokenTagger
TransformerFeatures
WsdLinear
_.CharacterDataHandler
_.EndElementHandler
_.StartElementHandler
_.best_dev
_.buffer_text
_.computed
_.demo_examples
_.embed_lazy
_.embed_sentence
_.extra_repr
_.forward
_.parameter_count
_.reset_states
__getattr__  # elmo_tasks.__version__, looked up by Python's module attribute hook
best_dev
max_dev
max_test
max_train
plot_layer_weights
read_csv
read_hf
read_sst
read_tsv
read_wsd
