"""genzoo fit: the training loop every method shares, one module per job.

    loop         fit() and the Trainer: the run from setup to the last checkpoint, one step from data
                 to optimiser, and stopping on a signal at a whole step
    step         the engine, TrainStep: backward, gradient averaging across processes, clipping,
                 fp16 loss scaling and stepping, for methods that own their update and (through
                 single_loss_update) for single-loss ones; the optimisers a method configures
    precision    the run's precision, decided once (fresh or resumed) and applied by one object
                 (RunPrecision: autocast and loss scaling)
    start        setting a run up: the Accelerator, the output folder, the method with its
                 optimisers and EMA, --init, and the run's plan (RunPlan: fit.json read once, the
                 checkpoint to resume from, the precision and settings agreed), shared by every process
    batches      which images each process trains on at each step (BatchSampler)
    ema          the moving average of a method's weights
    options      the options of genzoo fit (FitOptions), checked where declared
    lock         one run per output folder (RunLock)
    record       fit.json, metrics.jsonl and the provenance a model directory carries (RunRecord)
    checkpoints  the self-verifying checkpoint layout: written, verified, read back
    saver        what a checkpoint writes: every process's part, the model directory, the grid

Plugin authors use ``genzoo.fit``, ``genzoo.TrainStep`` and ``genzoo.testing``, not these modules.
"""
