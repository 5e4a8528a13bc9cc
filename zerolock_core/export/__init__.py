"""What a run gives back: the fine-tuned model as one PEFT model, its adapters in PEFT's files and
generations beside the base model's."""
