# idiom: Kaggle-notebook layout, Ridge on one-hot features, submission saved to an output/ folder that was never created; intended: crash (OSError: cannot save into a non-existent directory)
import os

import numpy as np
import pandas as pd
from sklearn.linear_model import Ridge
from sklearn.model_selection import cross_val_score

DATA_DIR = "data"
OUTPUT_DIR = "output"

train = pd.read_csv(os.path.join(DATA_DIR, "train.csv"))
test = pd.read_csv(os.path.join(DATA_DIR, "test.csv"))

both = pd.get_dummies(pd.concat([train.drop(columns=["visits"]), test]), drop_first=True, dtype=float)
X = both.iloc[: len(train)].drop(columns=["id"])
X_test = both.iloc[len(train):].drop(columns=["id"])
y = train["visits"]

ridge = Ridge(alpha=10.0)
rmse = np.sqrt(-cross_val_score(ridge, X, y, cv=5, scoring="neg_mean_squared_error"))
print("CV RMSE: %.3f" % rmse.mean())

ridge.fit(X, y)
submission = pd.DataFrame({"id": test["id"], "visits": np.clip(ridge.predict(X_test), 0, None)})
submission.to_csv(os.path.join(OUTPUT_DIR, "submission.csv"), index=False)
print("Saved to", os.path.join(OUTPUT_DIR, "submission.csv"))
