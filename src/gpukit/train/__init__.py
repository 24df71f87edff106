"""Training, prediction and export of image classifiers (`gpukit train`, `predict`, `export`).

torch is imported only when a model is built or a run starts, so importing this package stays light.
"""

from gpukit.train.augment import AugmentConfig
from gpukit.train.config import EpochMetrics, TrainConfig, TrainResult
from gpukit.train.export import ExportResult, export_onnx
from gpukit.train.loop import train
from gpukit.train.predict import Prediction, predict

__all__ = [
    "AugmentConfig",
    "EpochMetrics",
    "ExportResult",
    "Prediction",
    "TrainConfig",
    "TrainResult",
    "export_onnx",
    "predict",
    "train",
]
