"""Quality: agreement with people (WikiEval) and checks of the prompts on real model output."""
